"""MobileNet-style depthwise-separable blocks."""
from tensorflow import keras
from tensorflow.keras import layers


def depthwise_block(x, filters, strides):
    x = layers.DepthwiseConv2D(3, strides=strides, padding="same", use_bias=False)(x)
    x = layers.BatchNormalization()(x)
    x = layers.ReLU(6.0)(x)
    x = layers.Conv2D(filters, 1, use_bias=False)(x)
    x = layers.BatchNormalization()(x)
    return layers.ReLU(6.0)(x)


inputs = keras.Input(shape=(160, 160, 3))
x = layers.Conv2D(32, 3, strides=2, padding="same", use_bias=False)(inputs)
x = layers.BatchNormalization()(x)
x = layers.ReLU(6.0)(x)
x = depthwise_block(x, 64, 1)
x = depthwise_block(x, 128, 2)
x = depthwise_block(x, 128, 1)
x = layers.SeparableConv2D(256, 3, strides=2, padding="same")(x)
x = layers.GlobalAveragePooling2D()(x)
outputs = layers.Dense(2, activation="softmax")(x)
model = keras.Model(inputs, outputs)

if __name__ == "__main__":
    model.compile(optimizer=keras.optimizers.RMSprop(learning_rate=1e-3), loss="categorical_crossentropy")
    model.fit(train_generator_x, train_y, batch_size=64, epochs=10)
