"""MNIST MLP built with Sequential.add and input_dim, trained with the default batch size."""
from keras.models import Sequential
from keras.layers import Dense, Dropout, Activation

model = Sequential()
model.add(Dense(512, input_dim=784))
model.add(Activation("relu"))
model.add(Dropout(0.2))
model.add(Dense(512, activation="relu"))
model.add(Dropout(0.2))
model.add(Dense(10, activation="softmax"))

if __name__ == "__main__":
    model.compile(loss="categorical_crossentropy", optimizer="rmsprop")
    model.fit(x_train, y_train, epochs=20)
