"""Pooling with explicit strides and same padding, ZeroPadding2D, dilation."""
from tensorflow import keras
from tensorflow.keras import layers

model = keras.Sequential([
    layers.InputLayer(shape=(75, 75, 3)),
    layers.ZeroPadding2D(padding=3),
    layers.Conv2D(24, 7, strides=2),
    layers.AveragePooling2D(pool_size=3, strides=2, padding="same"),
    layers.Conv2D(48, 3, dilation_rate=2, padding="same", activation="elu"),
    layers.MaxPooling2D(pool_size=(3, 3), strides=(2, 2)),
    layers.Conv2D(64, (1, 3), padding="valid"),
    layers.LeakyReLU(),
    layers.GlobalMaxPooling2D(),
    layers.Dense(3),
])

if __name__ == "__main__":
    model.compile(optimizer="adam", loss="mse")
    model.fit(data, targets, batch_size=100, epochs=3)
