"""1D convnet over embeddings with GlobalMaxPooling1D."""
import keras
from keras import layers

inputs = keras.Input(shape=(400,), dtype="int32")
x = layers.Embedding(5000, 50)(inputs)
x = layers.Dropout(0.2)(x)
x = layers.Conv1D(250, 3, padding="valid", activation="relu", strides=1)(x)
x = layers.Conv1D(128, 5, padding="causal", dilation_rate=2, activation="relu")(x)
x = layers.GlobalMaxPooling1D()(x)
x = layers.Dense(250, activation="relu")(x)
outputs = layers.Dense(1, activation="sigmoid")(x)
model = keras.Model(inputs, outputs)

if __name__ == "__main__":
    model.compile(loss="binary_crossentropy", optimizer="adam")
    model.fit(x_train, y_train, batch_size=32, epochs=2)
