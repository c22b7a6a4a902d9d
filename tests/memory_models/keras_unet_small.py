"""Small U-Net with skip connections (Concatenate) and UpSampling2D."""
from tensorflow import keras
from tensorflow.keras import layers


def conv_block(x, filters):
    x = layers.Conv2D(filters, 3, padding="same", activation="relu")(x)
    x = layers.Conv2D(filters, 3, padding="same", activation="relu")(x)
    return x


def build_unet(size=128, channels=1, classes=3):
    inputs = layers.Input((size, size, channels))
    c1 = conv_block(inputs, 16)
    p1 = layers.MaxPooling2D()(c1)
    c2 = conv_block(p1, 32)
    p2 = layers.MaxPooling2D()(c2)
    b = conv_block(p2, 64)
    u2 = layers.UpSampling2D()(b)
    u2 = layers.Concatenate()([u2, c2])
    c3 = conv_block(u2, 32)
    u1 = layers.UpSampling2D(size=(2, 2))(c3)
    u1 = layers.Concatenate()([u1, c1])
    c4 = conv_block(u1, 16)
    outputs = layers.Conv2D(classes, 1, activation="softmax")(c4)
    return keras.Model(inputs, outputs)


model = build_unet()

if __name__ == "__main__":
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    model.fit(images, masks, batch_size=16, epochs=25)
