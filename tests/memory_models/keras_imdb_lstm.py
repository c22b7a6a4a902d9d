"""IMDB sentiment with Embedding and a stacked LSTM."""
from tensorflow import keras
from tensorflow.keras import layers

max_features = 20000
maxlen = 200

inputs = keras.Input(shape=(maxlen,), dtype="int32")
x = layers.Embedding(max_features, 128)(inputs)
x = layers.LSTM(64, return_sequences=True)(x)
x = layers.LSTM(64)(x)
outputs = layers.Dense(1, activation="sigmoid")(x)
model = keras.Model(inputs, outputs)

if __name__ == "__main__":
    model.compile("adam", "binary_crossentropy", metrics=["accuracy"])
    model.fit(x_train, y_train, batch_size=32, epochs=2, validation_data=(x_val, y_val))
