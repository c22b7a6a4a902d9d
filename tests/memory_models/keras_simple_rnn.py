"""Time-series regression with SimpleRNN over (timesteps, features)."""
from tensorflow import keras

timesteps, features = 48, 7

model = keras.Sequential()
model.add(keras.layers.SimpleRNN(40, return_sequences=True, input_shape=(timesteps, features)))
model.add(keras.layers.SimpleRNN(40))
model.add(keras.layers.Dense(24))

if __name__ == "__main__":
    model.compile(optimizer="adam", loss="mse")
    model.fit(X, Y, batch_size=16, epochs=100)
