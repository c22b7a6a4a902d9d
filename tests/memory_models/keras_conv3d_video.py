"""3D convolutions over short video clips."""
from tensorflow import keras
from tensorflow.keras import layers

model = keras.Sequential([
    keras.Input(shape=(16, 64, 64, 3)),
    layers.Conv3D(32, kernel_size=3, padding="same", activation="relu"),
    layers.MaxPooling3D(pool_size=(1, 2, 2)),
    layers.Conv3D(64, kernel_size=3, padding="same", activation="relu"),
    layers.MaxPooling3D(pool_size=2),
    layers.Conv3D(128, kernel_size=(3, 3, 3), strides=(1, 2, 2), activation="relu"),
    layers.GlobalAveragePooling3D(),
    layers.Dense(101, activation="softmax"),
])

if __name__ == "__main__":
    model.compile(optimizer="sgd", loss="categorical_crossentropy")
    model.fit(clips, labels, batch_size=8, epochs=30)
