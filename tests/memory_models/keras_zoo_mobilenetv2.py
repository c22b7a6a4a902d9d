"""keras.applications `MobileNetV2` trained from scratch."""
import tensorflow as tf

model = tf.keras.applications.MobileNetV2(weights=None, input_shape=(160, 160, 3), classes=10)
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])

if __name__ == "__main__":
    model.fit(x_train, y_train, batch_size=128, epochs=10)
