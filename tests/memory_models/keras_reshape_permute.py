"""Reshape and Permute around a Dense layer (spectrogram to sequence)."""
from tensorflow import keras
from tensorflow.keras import layers

model = keras.Sequential([
    keras.Input(shape=(128, 32, 1)),
    layers.Conv2D(16, 3, padding="same", activation="relu"),
    layers.MaxPooling2D((2, 2)),
    layers.Permute((2, 1, 3)),
    layers.Reshape((16, -1)),
    layers.Dense(64, activation="relu"),
    layers.LSTM(32),
    layers.Dense(12, activation="softmax"),
])

if __name__ == "__main__":
    model.compile(optimizer="adam", loss="categorical_crossentropy")
    model.fit(spectrograms, labels, batch_size=64, epochs=40)
