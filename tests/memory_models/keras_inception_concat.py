"""Inception-style block with Concatenate in the functional API."""
from tensorflow import keras
from tensorflow.keras import layers

inputs = keras.Input(shape=(96, 96, 3))
x = layers.Conv2D(64, 7, strides=2, padding="same", activation="relu")(inputs)
x = layers.MaxPooling2D(3, strides=2, padding="same")(x)
branch1 = layers.Conv2D(32, 1, activation="relu")(x)
branch3 = layers.Conv2D(48, 1, activation="relu")(x)
branch3 = layers.Conv2D(64, 3, padding="same", activation="relu")(branch3)
branch5 = layers.Conv2D(8, 1, activation="relu")(x)
branch5 = layers.Conv2D(16, 5, padding="same", activation="relu")(branch5)
pool = layers.MaxPooling2D(3, strides=1, padding="same")(x)
pool = layers.Conv2D(16, 1, activation="relu")(pool)
x = layers.Concatenate(axis=-1)([branch1, branch3, branch5, pool])
x = layers.GlobalAveragePooling2D()(x)
outputs = layers.Dense(5, activation="softmax")(x)
model = keras.Model(inputs=inputs, outputs=outputs)

if __name__ == "__main__":
    model.compile(optimizer="adam", loss="categorical_crossentropy")
    model.fit(train_x, train_y, batch_size=32, epochs=10)
