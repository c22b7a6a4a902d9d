"""Dense layers applied per timestep of a 3D input, then flattened."""
from tensorflow import keras
from tensorflow.keras import layers

inputs = keras.Input(shape=(50, 20))
x = layers.Dense(64, activation="relu")(inputs)
x = layers.LayerNormalization()(x)
x = layers.Dense(32, activation="tanh")(x)
x = layers.Flatten()(x)
x = layers.Dense(16, activation="relu")(x)
outputs = layers.Dense(1)(x)
model = keras.Model(inputs, outputs)

if __name__ == "__main__":
    model.compile(optimizer="adam", loss="mae")
    model.fit(windows, targets, batch_size=512, epochs=10)
