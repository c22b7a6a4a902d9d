"""Convolutional autoencoder with Conv2DTranspose and UpSampling2D."""
from tensorflow import keras
from tensorflow.keras import layers

input_img = keras.Input(shape=(28, 28, 1))
x = layers.Conv2D(32, (3, 3), activation="relu", padding="same")(input_img)
x = layers.MaxPooling2D((2, 2), padding="same")(x)
x = layers.Conv2D(16, (3, 3), activation="relu", padding="same")(x)
encoded = layers.MaxPooling2D((2, 2), padding="same")(x)
x = layers.Conv2DTranspose(16, (3, 3), strides=2, activation="relu", padding="same")(encoded)
x = layers.Conv2DTranspose(32, 3, strides=2, activation="relu", padding="valid")(x)
x = layers.Conv2D(32, 2, activation="relu")(x)
x = layers.UpSampling2D((1, 1))(x)
decoded = layers.Conv2D(1, (3, 3), activation="sigmoid", padding="same")(x)
model = keras.Model(input_img, decoded)

if __name__ == "__main__":
    model.compile(optimizer="adam", loss="binary_crossentropy")
    model.fit(x_train, x_train, epochs=50, batch_size=256, shuffle=True)
