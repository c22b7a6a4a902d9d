"""Transformer encoder block for text classification (MultiHeadAttention, LayerNorm)."""
import keras
from keras import layers

maxlen = 64
vocab_size = 20000
embed_dim = 32
num_heads = 2
ff_dim = 32

inputs = layers.Input(shape=(maxlen,), dtype="int32")
x = layers.Embedding(vocab_size, embed_dim)(inputs)
attn = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)(x, x)
attn = layers.Dropout(0.1)(attn)
x = layers.LayerNormalization(epsilon=1e-6)(layers.Add()([x, attn]))
ffn = layers.Dense(ff_dim, activation="relu")(x)
ffn = layers.Dense(embed_dim)(ffn)
x = layers.LayerNormalization(epsilon=1e-6)(layers.Add()([x, ffn]))
x = layers.GlobalAveragePooling1D()(x)
x = layers.Dropout(0.1)(x)
outputs = layers.Dense(2, activation="softmax")(x)
model = keras.Model(inputs=inputs, outputs=outputs)

if __name__ == "__main__":
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    model.fit(x_train, y_train, batch_size=32, epochs=2)
