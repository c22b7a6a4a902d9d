"""keras.applications `ResNet50` trained from scratch."""
import tensorflow as tf

model = tf.keras.applications.ResNet50(weights=None)
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])

if __name__ == "__main__":
    model.fit(x_train, y_train, batch_size=64, epochs=10)
