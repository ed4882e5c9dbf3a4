# The seed's script: the Keras MNIST MLP timed on the CPU and on the GPU, SMALL then BIG, as a
# TensorFlow user writes it. bench/seed-script runs it as is under TensorFlow and, with the first
# import changed to `import crossover as tf`, under crossover (tests/python runs that variant on
# mnist-10k). Only EPOCHS (default 10, the seed's), DEVICES (default "/cpu:0 /gpu:0") and DATASET
# (default mnist; fashion_mnist for the 60,000 images when there is no real MNIST: Keras refuses an
# mnist.npz whose hash is not MNIST's) may be changed from the environment; the rest is the script
# a user copies.
import os
import time

import tensorflow as tf

EPOCHS = int(os.environ.get("EPOCHS", "10"))
DEVICES = os.environ.get("DEVICES", "/cpu:0 /gpu:0").split()

mnist = getattr(tf.keras.datasets, os.environ.get("DATASET", "mnist"))
(x_train, y_train), (x_test, y_test) = mnist.load_data()
x_train, x_test = x_train / 255.0, x_test / 255.0


def small():
    return tf.keras.models.Sequential(
        [
            tf.keras.layers.Flatten(input_shape=(28, 28)),
            tf.keras.layers.Dense(128, activation="relu"),
            tf.keras.layers.Dropout(0.2),
            tf.keras.layers.Dense(10, activation="softmax"),
        ]
    )


def big():
    return tf.keras.models.Sequential(
        [
            tf.keras.layers.Flatten(input_shape=(28, 28)),
            tf.keras.layers.Dense(1000, activation="relu"),
            tf.keras.layers.Dropout(0.2),
            tf.keras.layers.Dense(1000, activation="relu"),
            tf.keras.layers.Dropout(0.2),
            tf.keras.layers.Dense(10, activation="softmax"),
        ]
    )


for name, make in (("SMALL", small), ("BIG", big)):
    for device in DEVICES:
        if device.startswith("/gpu") and not tf.config.list_physical_devices("GPU"):
            print(f"{name} {device}: no GPU")
            continue
        with tf.device(device):
            model = make()
            model.compile(
                optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"]
            )
            t0 = time.time()
            model.fit(x_train, y_train, epochs=EPOCHS)
            loss, accuracy = model.evaluate(x_test, y_test, verbose=2)
            t1 = time.time() - t0
        print(f"{name} {device}: t1 {t1:.2f} s, test loss {loss:.4f}, accuracy {accuracy:.4f}")
