"""Subclassed Keras model with a custom block, called on an Input to build it."""
import keras
from keras import layers


class ConvNet(keras.Model):
    def __init__(self, num_classes=10, width=64):
        super().__init__()
        self.stem = layers.Conv2D(width, 3, padding="same")
        self.bn = layers.BatchNormalization()
        self.act = layers.Activation("relu")
        self.pool = layers.MaxPooling2D()
        self.conv = layers.Conv2D(width * 2, 3, padding="same", activation="relu")
        self.gap = layers.GlobalAveragePooling2D()
        self.drop = layers.Dropout(0.3)
        self.head = layers.Dense(num_classes)

    def call(self, inputs, training=False):
        x = self.stem(inputs)
        x = self.bn(x, training=training)
        x = self.act(x)
        x = self.pool(x)
        x = self.conv(x)
        x = self.gap(x)
        x = self.drop(x, training=training)
        return self.head(x)


model = ConvNet(num_classes=37)
model(keras.Input(shape=(128, 128, 3)))

if __name__ == "__main__":
    model.compile(optimizer=keras.optimizers.AdamW(1e-3), loss="sparse_categorical_crossentropy")
    model.fit(images, labels, batch_size=48, epochs=20)
