"""Dot-product Attention layer over a Conv1D encoder (query/value)."""
from tensorflow import keras
from tensorflow.keras import layers

query_input = keras.Input(shape=(20,), dtype="int32")
value_input = keras.Input(shape=(30,), dtype="int32")
embedding = layers.Embedding(input_dim=1000, output_dim=64)
query_embeddings = embedding(query_input)
value_embeddings = embedding(value_input)
cnn = layers.Conv1D(filters=100, kernel_size=4, padding="same")
query_seq = cnn(query_embeddings)
value_seq = cnn(value_embeddings)
attention = layers.Attention()([query_seq, value_seq])
query_encoding = layers.GlobalAveragePooling1D()(query_seq)
attention_encoding = layers.GlobalAveragePooling1D()(attention)
merged = layers.Concatenate()([query_encoding, attention_encoding])
outputs = layers.Dense(1)(merged)
model = keras.Model(inputs=[query_input, value_input], outputs=outputs)

if __name__ == "__main__":
    model.compile(optimizer="adam", loss="mse")
    model.fit([q, v], y, batch_size=32)
