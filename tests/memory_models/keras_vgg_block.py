"""VGG-style stack built in a loop with a module constant config."""
from tensorflow import keras
from tensorflow.keras import layers

CFG = [64, 64, "M", 128, 128, "M", 256, 256, "M"]


def make_vgg(cfg, input_shape=(64, 64, 3), classes=200):
    model = keras.Sequential()
    model.add(keras.Input(shape=input_shape))
    for v in cfg:
        if v == "M":
            model.add(layers.MaxPooling2D(2))
        else:
            model.add(layers.Conv2D(v, 3, padding="same", activation="relu"))
    model.add(layers.Flatten())
    model.add(layers.Dense(1024, activation="relu"))
    model.add(layers.Dense(classes))
    return model


model = make_vgg(CFG)

if __name__ == "__main__":
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    model.fit(x, y, batch_size=64, epochs=60)
