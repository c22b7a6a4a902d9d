"""Bidirectional GRU text classifier (Sequential)."""
from tensorflow import keras
from tensorflow.keras import layers

VOCAB = 10000
SEQ_LEN = 120

model = keras.Sequential([
    keras.Input(shape=(SEQ_LEN,), dtype="int64"),
    layers.Embedding(VOCAB, 64),
    layers.Bidirectional(layers.GRU(32, return_sequences=True)),
    layers.Bidirectional(layers.GRU(16)),
    layers.Dense(64, activation="relu"),
    layers.Dense(4, activation="softmax"),
])

if __name__ == "__main__":
    model.compile(loss="sparse_categorical_crossentropy", optimizer=keras.optimizers.Adam(1e-4))
    model.fit(train_seqs, train_labels, batch_size=256, epochs=10)
