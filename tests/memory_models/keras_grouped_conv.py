"""Grouped convolutions (ResNeXt-like) with channels_last input."""
from tensorflow import keras
from tensorflow.keras import layers

inputs = keras.Input((56, 56, 64))
x = layers.Conv2D(128, 1, use_bias=False)(inputs)
x = layers.BatchNormalization()(x)
x = layers.Activation("relu")(x)
x = layers.Conv2D(128, 3, padding="same", groups=32, use_bias=False)(x)
x = layers.BatchNormalization()(x)
x = layers.Activation("relu")(x)
x = layers.Conv2D(256, 1, use_bias=False)(x)
shortcut = layers.Conv2D(256, 1, use_bias=False)(inputs)
x = layers.Add()([x, shortcut])
x = layers.Activation("relu")(x)
x = layers.GlobalAveragePooling2D()(x)
outputs = layers.Dense(1000)(x)
model = keras.Model(inputs, outputs)

if __name__ == "__main__":
    model.compile(optimizer=keras.optimizers.SGD(0.1, momentum=0.9), loss="categorical_crossentropy")
    model.fit(features, labels, batch_size=32, epochs=90)
