"""The architectures of Coral's benchmark table, rebuilt with random weights (a latency does not depend on weight values).

Keras has most of them (tf_keras.applications, weights=None). Four are not in Keras and are built here from their
papers' layer tables: Inception v1 (GoogLeNet as TF-slim builds it: BatchNorm, 3x3 convolutions in the "5x5"
branch), Inception v4 (its paper's figures, as TF-slim builds it), SqueezeNet 1.0 (fire modules) and the U-Net over MobileNetV2 at 128 px of TensorFlow's segmentation
tutorial (the encoder's five block outputs, pix2pix upsampling with transposed convolutions). Each builder returns
an uncompiled tf_keras model whose input is [1, size, size, 3].
"""
from __future__ import annotations

from typing import Callable, Dict, NamedTuple


class Arch(NamedTuple):
    name: str  # the row of Coral's table it stands for
    size: int  # input height and width (the length of a vector input when `vector`)
    build: Callable  # () -> tf_keras.Model
    vector: bool = False  # a [1, size] input instead of an image


def _apps():
    import tf_keras
    return tf_keras.applications


def _keras(cls_name: str, size: int, **kwargs):
    def build():
        cls = getattr(_apps(), cls_name)
        return cls(weights=None, input_shape=(size, size, 3), **kwargs)
    return build


def _conv_bn(x, filters, kernel, strides=1, padding="same", scale=True):
    from tf_keras import layers
    x = layers.Conv2D(filters, kernel, strides=strides, padding=padding, use_bias=False)(x)
    x = layers.BatchNormalization(scale=scale)(x)
    return layers.ReLU()(x)


def inception_v1(size: int = 224):
    """GoogLeNet (Szegedy et al. 2014, table 1) as TF-slim's inception_v1 builds it."""
    from tf_keras import Input, Model, layers
    inp = Input((size, size, 3), batch_size=1)
    x = _conv_bn(inp, 64, 7, 2)
    x = layers.MaxPool2D(3, 2, padding="same")(x)
    x = _conv_bn(x, 64, 1)
    x = _conv_bn(x, 192, 3)
    x = layers.MaxPool2D(3, 2, padding="same")(x)
    blocks = {"3b": (64, 96, 128, 16, 32, 32), "3c": (128, 128, 192, 32, 96, 64), "4b": (192, 96, 208, 16, 48, 64),
              "4c": (160, 112, 224, 24, 64, 64), "4d": (128, 128, 256, 24, 64, 64), "4e": (112, 144, 288, 32, 64, 64),
              "4f": (256, 160, 320, 32, 128, 128), "5b": (256, 160, 320, 32, 128, 128), "5c": (384, 192, 384, 48, 128, 128)}
    for name, (b0, b1a, b1b, b2a, b2b, b3) in blocks.items():
        if name in ("4b", "5b"):
            x = layers.MaxPool2D(3 if name == "4b" else 2, 2, padding="same")(x)
        branches = [_conv_bn(x, b0, 1), _conv_bn(_conv_bn(x, b1a, 1), b1b, 3), _conv_bn(_conv_bn(x, b2a, 1), b2b, 3),
                    _conv_bn(layers.MaxPool2D(3, 1, padding="same")(x), b3, 1)]
        x = layers.Concatenate()(branches)
    x = layers.GlobalAveragePooling2D()(x)
    x = layers.Dense(1001, activation="softmax")(x)
    return Model(inp, x, name="inception_v1")


def inception_v4(size: int = 299):
    """Inception-v4 (Szegedy et al. 2016, figures 3-9) as TF-slim's inception_v4 builds it: BatchNorm without a scale
    after each convolution, the stem's and the reductions' "V" convolutions unpadded, no auxiliary head (inference)."""
    from tf_keras import Input, Model, layers

    def conv(x, filters, kernel, strides=1, padding="same"):
        return _conv_bn(x, filters, kernel, strides, padding, scale=False)

    def pool(x, kind="max", strides=2, padding="valid"):
        cls = layers.MaxPool2D if kind == "max" else layers.AveragePooling2D
        return cls(3, strides, padding=padding)(x)

    cat = lambda xs: layers.Concatenate()(xs)  # noqa: E731
    inp = Input((size, size, 3), batch_size=1)
    x = conv(inp, 32, 3, 2, "valid")  # stem (figure 3)
    x = conv(x, 32, 3, padding="valid")
    x = conv(x, 64, 3)
    x = cat([pool(x), conv(x, 96, 3, 2, "valid")])
    x = cat([conv(conv(x, 64, 1), 96, 3, padding="valid"),
             conv(conv(conv(conv(x, 64, 1), 64, (1, 7)), 64, (7, 1)), 96, 3, padding="valid")])
    x = cat([conv(x, 192, 3, 2, "valid"), pool(x)])
    for _ in range(4):  # Inception-A (figure 4), 35x35x384
        x = cat([conv(x, 96, 1), conv(conv(x, 64, 1), 96, 3), conv(conv(conv(x, 64, 1), 96, 3), 96, 3),
                 conv(pool(x, "avg", 1, "same"), 96, 1)])
    x = cat([conv(x, 384, 3, 2, "valid"), conv(conv(conv(x, 192, 1), 224, 3), 256, 3, 2, "valid"), pool(x)])  # figure 7
    for _ in range(7):  # Inception-B (figure 5), 17x17x1024
        b2 = conv(conv(conv(conv(conv(x, 192, 1), 192, (7, 1)), 224, (1, 7)), 224, (7, 1)), 256, (1, 7))
        x = cat([conv(x, 384, 1), conv(conv(conv(x, 192, 1), 224, (1, 7)), 256, (7, 1)), b2,
                 conv(pool(x, "avg", 1, "same"), 128, 1)])
    x = cat([conv(conv(x, 192, 1), 192, 3, 2, "valid"),  # Reduction-B (figure 8)
             conv(conv(conv(conv(x, 256, 1), 256, (1, 7)), 320, (7, 1)), 320, 3, 2, "valid"), pool(x)])
    for _ in range(3):  # Inception-C (figure 6), 8x8x1536
        b1 = conv(x, 384, 1)
        b2 = conv(conv(conv(x, 384, 1), 448, (3, 1)), 512, (1, 3))
        x = cat([conv(x, 256, 1), conv(b1, 256, (1, 3)), conv(b1, 256, (3, 1)), conv(b2, 256, (1, 3)),
                 conv(b2, 256, (3, 1)), conv(pool(x, "avg", 1, "same"), 256, 1)])
    x = layers.GlobalAveragePooling2D()(x)
    x = layers.Dense(1001, activation="softmax")(x)
    return Model(inp, x, name="inception_v4")


def squeezenet(size: int = 224):
    """SqueezeNet 1.0 (Iandola et al. 2016, table 1): fire modules, no fully-connected layer."""
    from tf_keras import Input, Model, layers

    def fire(x, squeeze, expand):
        s = layers.Conv2D(squeeze, 1, activation="relu")(x)
        return layers.Concatenate()([layers.Conv2D(expand, 1, activation="relu")(s),
                                     layers.Conv2D(expand, 3, padding="same", activation="relu")(s)])
    inp = Input((size, size, 3), batch_size=1)
    x = layers.Conv2D(96, 7, strides=2, activation="relu")(inp)
    x = layers.MaxPool2D(3, 2)(x)
    for s, e in ((16, 64), (16, 64), (32, 128)):
        x = fire(x, s, e)
    x = layers.MaxPool2D(3, 2)(x)
    for s, e in ((32, 128), (48, 192), (48, 192), (64, 256)):
        x = fire(x, s, e)
    x = layers.MaxPool2D(3, 2)(x)
    x = fire(x, 64, 256)
    x = layers.Conv2D(1001, 1, activation="relu")(x)
    x = layers.GlobalAveragePooling2D()(x)
    x = layers.Softmax()(x)
    return Model(inp, x, name="squeezenet")


def dense(n: int):
    """One fully-connected layer n -> n without bias, as in the public compile logs of Dense(N, N) layers."""
    from tf_keras import Input, Model, layers
    inp = Input((n,), batch_size=1)
    return Model(inp, layers.Dense(n, use_bias=False)(inp), name=f"dense_{n}")


def unet_mobilenet_v2(size: int = 128, classes: int = 3):
    """TensorFlow's image-segmentation tutorial model: MobileNetV2's block outputs, pix2pix upsampling."""
    from tf_keras import Input, Model, layers
    base = _apps().MobileNetV2(weights=None, input_shape=(size, size, 3), include_top=False)
    names = ["block_1_expand_relu", "block_3_expand_relu", "block_6_expand_relu", "block_13_expand_relu", "block_16_project"]
    encoder = Model(base.input, [base.get_layer(n).output for n in names])
    inp = Input((size, size, 3), batch_size=1)
    skips = encoder(inp)
    x = skips[-1]
    for filters, skip in zip((512, 256, 128, 64), reversed(skips[:-1])):
        x = layers.Conv2DTranspose(filters, 3, strides=2, padding="same", use_bias=False)(x)
        x = layers.BatchNormalization()(x)
        x = layers.ReLU()(x)
        x = layers.Concatenate()([x, skip])
    x = layers.Conv2DTranspose(classes, 3, strides=2, padding="same")(x)
    return Model(inp, x, name="unet_mobilenet_v2")


ARCHITECTURES: Dict[str, Arch] = {a.name: a for a in [
    Arch("mobilenet_v1_224", 224, _keras("MobileNet", 224)),
    Arch("mobilenet_v2_224", 224, _keras("MobileNetV2", 224)),
    Arch("inception_v1_224", 224, lambda: inception_v1(224)),
    Arch("squeezenet_224", 224, lambda: squeezenet(224)),
    Arch("unet_mobilenet_v2_128", 128, lambda: unet_mobilenet_v2(128)),
    Arch("densenet121_224", 224, _keras("DenseNet121", 224)),
    Arch("resnet50_v1_299", 299, _keras("ResNet50", 299)),
    Arch("resnet50_v2_299", 299, _keras("ResNet50V2", 299)),
    Arch("inception_v3_299", 299, _keras("InceptionV3", 299)),
    Arch("inception_v4_299", 299, lambda: inception_v4(299)),
    Arch("inception_resnet_v2_299", 299, _keras("InceptionResNetV2", 299)),
    Arch("resnet152_v2_299", 299, _keras("ResNet152V2", 299)),
    Arch("vgg16_224", 224, _keras("VGG16", 224)),
    Arch("vgg19_224", 224, _keras("VGG19", 224)),
    Arch("dense_256", 256, lambda: dense(256), vector=True),
    Arch("dense_8192", 8192, lambda: dense(8192), vector=True),
]}
