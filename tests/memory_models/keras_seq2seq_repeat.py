"""LSTM autoencoder for sequences with RepeatVector."""
from tensorflow import keras
from tensorflow.keras import layers

n_steps, n_features = 30, 3

model = keras.Sequential()
model.add(keras.Input(shape=(n_steps, n_features)))
model.add(layers.LSTM(100, activation="relu"))
model.add(layers.RepeatVector(n_steps))
model.add(layers.LSTM(100, activation="relu", return_sequences=True))
model.add(layers.Dense(n_features))

if __name__ == "__main__":
    model.compile(optimizer="adam", loss="mse")
    model.fit(sequences, sequences, epochs=300, batch_size=8)
