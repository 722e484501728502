"""How other programs feed a model: each known client's preprocessing, reproduced from its source.

    from edge import clients
    details = interpreter.get_input_details()[0]
    tensor = clients.pycoral_classify("cat.jpg", details)         # what pycoral's classify_image.py feeds
    tensor = clients.mediapipe_classify("cat.jpg", details)       # what MediaPipe's ImageClassifier feeds
    boxed = clients.pycoral_detect("street.jpg", details)         # detect_image.py: tensor and the box scale
    tensor = clients.frigate_detect(frame_rgb, details)           # Frigate's SSD feed of a whole frame (approximate)
    rows = clients.frigate_ssd_read(interpreter)                   # Frigate's SSD reading of a detector's outputs
    tensor = clients.edgeflow(path, details, contract)            # edgeflow's own pixel contract
    placed = clients.DETECTORS["pycoral"](path, details)          # a detector's input and the client's way back:
    boxes, kept = placed.to_image(op_boxes)                        #   the op's boxes as that client reports them

Every function returns the input tensor (batch 1) that client would set on the interpreter for one image, so
the same int8 model can be scored as each client would run it. A user's accuracy depends on how pixels reach
the input (resize filter, antialiasing, how a non-square picture is fitted to a square input), and the
clients differ in exactly those steps:

  client                       fit to the input               resize                        decode
  edgeflow (edge.pixels.contract)     stretch                        bilinear, antialiased          Pillow, JPEG at 1/k scale
  pycoral classify_image.py    stretch                        LANCZOS (antialiased)          Pillow, full size
  pycoral detect_image.py      keep aspect, top-left, zeros   LANCZOS (antialiased)          Pillow, full size
  MediaPipe ImageClassifier    stretch, corners to corners    bilinear, NOT antialiased      stb_image, JPEG EXIF applied
  MediaPipe ObjectDetector     the same as its ImageClassifier
  Frigate SSD detector         square region of the frame     bilinear, NOT antialiased      camera stream (I420)

Reproduced exactly (checked image by image against the real client): pycoral's two, given the same Pillow
(pycoral's own bytes change with Pillow's version: LANCZOS from 160x420 to 15x39 differs by up to 5 grey
levels between Pillow 11.3 and 13.0). MediaPipe with a uint8 input: resize and value mapping exactly, from
the pixels MediaPipe decodes; its JPEG decoder (stb_image, not libjpeg) to within a few grey levels; its
float32 path is read from the source, not checked against MediaPipe. Frigate: an approximation (see
frigate_detect). Only MediaPipe turns a JPEG upright by its EXIF orientation; the others feed it as stored.
For detectors, each client's way back from the op's boxes to the picture is reproduced too (DETECTORS, below).
"""
from __future__ import annotations

import io
from functools import partial
from pathlib import Path
from typing import Any, Callable, Dict, NamedTuple, Optional, Tuple, Union

import numpy as np

from edge.errors import InputError
from edge.pixels.preprocess import decode_error

Source = Union[str, Path, bytes, Any]  # a file, encoded bytes or an open PIL image

# pycoral's classify_image.py defaults: --input_mean 128 --input_std 128.
PYCORAL_MEAN = 128.0
PYCORAL_STD = 128.0


class Letterboxed(NamedTuple):
    """A detector's input and the factor that maps input pixels back to the image (pycoral's `scale`)."""

    tensor: np.ndarray
    scale: Tuple[float, float]


def _open(source: Source, what: str) -> Any:
    """The PIL image, fully decoded, as the client opens it (Image.open, no EXIF transpose, no draft)."""
    from PIL import Image, UnidentifiedImageError

    if isinstance(source, Image.Image):
        return source
    name = str(source) if not isinstance(source, bytes) else "image bytes"
    try:
        image = Image.open(io.BytesIO(source) if isinstance(source, bytes) else source)
        image.load()
        return image
    except FileNotFoundError as err:
        raise InputError(f"image {name} not found") from err
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as err:
        raise InputError(f"cannot read image {name} for {what}: {decode_error(err)}; expected a PNG, JPEG, BMP or GIF file") from err


def _size(details: Dict[str, Any]) -> Tuple[int, int]:
    shape = list(details["shape"])
    if len(shape) != 4 or shape[0] != 1 or shape[3] != 3:
        raise InputError(f"model input shape {shape}, expected [1, height, width, 3]")
    return int(shape[2]), int(shape[1])


def _quantization(details: Dict[str, Any]) -> Tuple[float, int]:
    scale, zero_point = details["quantization"]
    return float(scale), int(zero_point)


# ---------------------------------------------------------------------------------------------
# edgeflow


def edgeflow(source: Union[Source, np.ndarray], details: Dict[str, Any], contract: Any) -> np.ndarray:
    """edgeflow's own feed: the model's pixel contract (edge.pixels.contract.PixelContract), as `edge classify` does."""
    from PIL import Image

    if isinstance(source, Image.Image):
        source = np.asarray(source.convert("RGB"))
    return contract.to_input(contract.load_pixels(source, _size(details)), details)


# ---------------------------------------------------------------------------------------------
# pycoral (google-coral/pycoral at commit 46f06c8: examples/classify_image.py, examples/detect_image.py,
# pycoral/adapters/common.py)


def pycoral_classify(source: Source, details: Dict[str, Any], mean: float = PYCORAL_MEAN,
                     std: float = PYCORAL_STD) -> np.ndarray:
    """The uint8 input pycoral's examples/classify_image.py feeds (default flags unless mean/std are given).

    It converts the file to RGB and stretches it to the input size with LANCZOS. When the input's quantization
    already encodes the normalization (|scale * std - 1| < 1e-5 and |mean - zero point| < 1e-5) the pixels go in
    as they are; otherwise it computes (pixel - mean) / (std * scale) + zero_point in float64, clips to 0..255 and
    truncates to uint8 (astype, not rounding). It refuses any input but uint8."""
    from PIL import Image

    if np.dtype(details["dtype"]) != np.uint8:
        raise InputError(f"model input is {np.dtype(details['dtype'])}; pycoral's classify_image.py supports only uint8")
    image = _open(source, "pycoral").convert("RGB").resize(_size(details), Image.LANCZOS)
    scale, zero_point = _quantization(details)
    pixels = np.asarray(image)
    if abs(scale * std - 1) < 1e-5 and abs(mean - zero_point) < 1e-5:
        return pixels[np.newaxis].copy()
    # pycoral multiplies std by the interpreter's float32 scales array: that product is float32, the rest float64.
    values = (pixels - mean) / (std * np.array([scale], np.float32)) + np.array([zero_point], np.int32)
    np.clip(values, 0, 255, out=values)
    return values.astype(np.uint8)[np.newaxis]


def pycoral_detect(source: Source, details: Dict[str, Any]) -> Letterboxed:
    """The input pycoral's examples/detect_image.py feeds through common.set_resized_input, and its scale.

    The image keeps its aspect ratio: scale = min(input width / width, input height / height), the resized size
    is int(width * scale) x int(height * scale) (LANCZOS), placed in the top-left corner of a zero-filled input.
    detect_image.py does not convert the file to RGB, so the file must already be 3-channel. The bytes are
    written into the input as they are: for an int8 input, numpy's uint8-to-int8 assignment wraps (200 -> -56)."""
    from PIL import Image

    image = _open(source, "pycoral")
    width, height = _size(details)
    w, h = image.size
    scale = min(width / w, height / h)
    w, h = int(w * scale), int(h * scale)
    resized = np.asarray(image.resize((w, h), Image.LANCZOS))
    if resized.size != h * w * 3:
        raise InputError(f"image mode {image.mode} has {resized.size // max(h * w, 1)} channel(s); pycoral's "
                         "detect_image.py feeds the file unconverted and needs 3 (RGB)")
    tensor = np.zeros((height, width, 3), np.dtype(details["dtype"]))
    tensor[:h, :w] = resized.reshape(h, w, 3).astype(tensor.dtype)
    return Letterboxed(tensor[np.newaxis], (scale, scale))


# ---------------------------------------------------------------------------------------------
# MediaPipe Tasks ImageClassifier (google-ai-edge/mediapipe, v1.0.0 line, read at commit 85c0cdc:
# mediapipe/python/pybind/image.cc (Image.create_from_file), mediapipe/tasks/cc/components/processors/
# image_preprocessing_graph.cc, mediapipe/calculators/tensor/image_to_tensor_calculator.cc, image_to_tensor_utils.cc
# and image_to_tensor_converter_opencv.cc)

_INTER_BITS = 5  # OpenCV's warp: source coordinates in 1/32 pixel
_INTER_TAB = 1 << _INTER_BITS
_COEF_BITS = 15  # OpenCV's remap: bilinear weights in 1/32768


def mediapipe_pixels(source: Union[Source, np.ndarray]) -> np.ndarray:
    """The pixels MediaPipe's Image.create_from_file hands the classifier: 8-bit RGB, alpha dropped, a JPEG turned
    upright by its EXIF orientation (MediaPipe parses EXIF in JPEGs only).

    MediaPipe decodes with stb_image; this uses Pillow, which is identical for PNG, BMP and GIF and differs for
    JPEG by a few grey levels (stb_image has its own IDCT and chroma upsampling). A greyscale file stays one
    channel in MediaPipe, which a 3-channel model refuses: refused here too."""
    if isinstance(source, np.ndarray):
        pixels = source
    else:
        from PIL import ImageOps

        image = _open(source, "MediaPipe")
        if image.format == "JPEG":
            image = ImageOps.exif_transpose(image)
        if image.mode in ("1", "L", "LA", "I", "I;16", "F"):
            raise InputError(f"image mode {image.mode}: MediaPipe feeds a greyscale file as one channel, expected RGB(A)")
        if image.mode == "P":
            image = image.convert("RGBA" if "transparency" in image.info else "RGB")
        pixels = np.asarray(image.convert("RGBA") if image.mode not in ("RGB", "RGBA") else image)
    if pixels.ndim != 3 or pixels.shape[2] not in (3, 4) or pixels.dtype != np.uint8:
        raise InputError(f"image array {pixels.dtype} {list(pixels.shape)}, expected uint8 [height, width, 3 or 4]")
    return pixels[..., :3]  # cv::COLOR_RGBA2RGB after the warp drops alpha, uncomposited


def _warp_bilinear(pixels: np.ndarray, size: Tuple[int, int]) -> np.ndarray:
    """The whole image warped onto `size` (width, height) as MediaPipe's OpenCV converter does it.

    The region's corners (0, 0) .. (W, H) map to the tensor's corners (0, 0) .. (w, h), so output pixel x
    samples source x * W / w (no half-pixel centring), rounded to 1/32 pixel; bilinear with 15-bit weights;
    no antialiasing whatever the shrink; outside pixels replicate the border (BORDER_REPLICATE, the default)."""
    height, width = pixels.shape[:2]
    out_w, out_h = size

    def axis(n_out: int, n_in: int):
        fixed = np.rint(np.arange(n_out, dtype=np.float64) * (n_in / n_out) * _INTER_TAB).astype(np.int64)
        low, frac = fixed >> _INTER_BITS, (fixed & (_INTER_TAB - 1)) / _INTER_TAB
        return np.clip(low, 0, n_in - 1), np.clip(low + 1, 0, n_in - 1), frac

    x0, x1, fx = axis(out_w, width)
    y0, y1, fy = axis(out_h, height)
    # OpenCV's table: each of the four weights rounded to 1/32768 (the 1D products are exact in float).
    scale = 1 << _COEF_BITS
    wx, wy = fx[np.newaxis, :], fy[:, np.newaxis]
    w00 = np.rint((1 - wy) * (1 - wx) * scale).astype(np.int64)
    w01 = np.rint((1 - wy) * wx * scale).astype(np.int64)
    w10 = np.rint(wy * (1 - wx) * scale).astype(np.int64)
    w11 = np.rint(wy * wx * scale).astype(np.int64)
    src = pixels.astype(np.int64)
    total = (src[y0][:, x0] * w00[..., None] + src[y0][:, x1] * w01[..., None]
             + src[y1][:, x0] * w10[..., None] + src[y1][:, x1] * w11[..., None])
    return np.clip((total + (1 << (_COEF_BITS - 1))) >> _COEF_BITS, 0, 255).astype(np.uint8)


def mediapipe_classify(source: Union[Source, np.ndarray], details: Dict[str, Any],
                       mean: Optional[float] = None, std: Optional[float] = None) -> np.ndarray:
    """The input MediaPipe's ImageClassifier (Python Tasks API, CPU) feeds, for an image from create_from_file.

    The whole image (no region of interest, no rotation) is stretched to the input size: keep_aspect_ratio is
    not set by the Tasks preprocessing graph. A uint8 input gets the warped bytes as they are, whatever its
    quantization; a float32 input gets (pixel - mean) / std with the mean and std of the model's metadata
    (one value for all channels; read from the source, not checked against MediaPipe); MediaPipe refuses any
    other input type."""
    dtype = np.dtype(details["dtype"])
    pixels = _warp_bilinear(mediapipe_pixels(source), _size(details))
    if dtype == np.uint8:
        return pixels[np.newaxis]
    if dtype != np.float32:
        raise InputError(f"model input is {dtype}; MediaPipe's ImageClassifier takes only uint8 or float32")
    if mean is None or std is None:
        raise InputError("a float32 input needs the mean and std of the model's metadata (MediaPipe reads them there)")
    # convertTo(dst, CV_32F, scale, offset) with the float range [(0 - mean) / std, (255 - mean) / std].
    low, high = (0.0 - mean) / std, (255.0 - mean) / std
    return (pixels.astype(np.float32) * np.float32((high - low) / 255.0) + np.float32(low))[np.newaxis]


# ---------------------------------------------------------------------------------------------
# Frigate (blakeblackshear/frigate, v0.17/v0.18 line, read at commit e3fa701: frigate/util/object.py
# create_tensor_input, frigate/util/image.py yuv_crop_and_resize, frigate/detectors/plugins/edgetpu_tfl.py)


def _resize_linear(pixels: np.ndarray, size: Tuple[int, int]) -> np.ndarray:
    """cv2.resize(..., INTER_LINEAR) when OpenCV is importable; else bilinear with half-pixel centres and no
    antialiasing in float, rounded, which differs from OpenCV's 11-bit fixed point by at most a grey level or so."""
    try:
        import cv2  # type: ignore
    except ImportError:
        cv2 = None
    if cv2 is not None:
        return cv2.resize(pixels, size, interpolation=cv2.INTER_LINEAR)
    height, width = pixels.shape[:2]
    out_w, out_h = size

    def axis(n_out: int, n_in: int):
        pos = (np.arange(n_out) + 0.5) * (n_in / n_out) - 0.5
        low = np.floor(pos).astype(np.int64)
        frac = pos - low
        frac[low < 0] = 0
        low = np.clip(low, 0, n_in - 1)
        return low, np.minimum(low + 1, n_in - 1), frac

    x0, x1, fx = axis(out_w, width)
    y0, y1, fy = axis(out_h, height)
    src = pixels.astype(np.float64)
    top = src[y0][:, x0] * (1 - fx)[None, :, None] + src[y0][:, x1] * fx[None, :, None]
    bottom = src[y1][:, x0] * (1 - fx)[None, :, None] + src[y1][:, x1] * fx[None, :, None]
    return np.clip(np.rint(top * (1 - fy)[:, None, None] + bottom * fy[:, None, None]), 0, 255).astype(np.uint8)


def frigate_cut(pixels: np.ndarray, region: Tuple[int, int, int, int]) -> np.ndarray:
    """The square Frigate cuts from an RGB frame for region (x1, y1, x2, y2): side (y2 - y1) rounded down to a
    multiple of 4, the frame's pixels at their place in it, black outside the frame."""
    if pixels.ndim != 3 or pixels.shape[2] != 3 or pixels.dtype != np.uint8:
        raise InputError(f"frame {pixels.dtype} {list(pixels.shape)}, expected uint8 [height, width, 3] RGB")
    height, width = pixels.shape[:2]
    x1, y1, x2, y2 = region
    side = (y2 - y1) // 4 * 4
    if side <= 0 or x2 <= x1:
        raise InputError(f"region {(x1, y1, x2, y2)}, expected x1 < x2 and y1 < y2 (at least 4 pixels high)")
    cut = np.zeros((side, side, 3), np.uint8)
    sx1, sy1 = max(0, x1), max(0, y1)
    sx2, sy2 = min(width, x2, x1 + side), min(height, y1 + side)
    if sx2 > sx1 and sy2 > sy1:
        cut[sy1 - y1:sy2 - y1, sx1 - x1:sx2 - x1] = pixels[sy1:sy2, sx1:sx2]
    return cut


def frigate_detect(frame: Union[Source, np.ndarray], details: Dict[str, Any],
                   region: Optional[Tuple[int, int, int, int]] = None) -> np.ndarray:
    """Approximately the input Frigate's Edge TPU plugin feeds an SSD detector (model_type ssd, RGB).

    Frigate cuts a square region from the camera frame (frigate_cut; by default the whole frame's region,
    frigate_frame_region), converts it to RGB and stretches it to
    the model's width and height with cv2.resize INTER_LINEAR (no antialiasing); for an int8 input it flips the
    top bit (byte - 128). Not a reproduction: Frigate's frame is the camera's YUV 4:2:0 stream and this takes
    RGB pixels (or a file), so the chroma subsampling and BT.601 conversion are not modelled, and without
    OpenCV the resize is the float approximation of _resize_linear (within one grey level of OpenCV, tested)."""
    pixels = frame if isinstance(frame, np.ndarray) else np.asarray(_open(frame, "Frigate").convert("RGB"))
    size = _size(details)
    cut = frigate_cut(pixels, region if region is not None else frigate_frame_region(pixels.shape[1], pixels.shape[0], size))
    resized = cut if cut.shape[:2] == (size[1], size[0]) else _resize_linear(cut, size)
    dtype = np.dtype(details["dtype"])
    if dtype == np.int8:
        return np.bitwise_xor(resized, 128).view(np.int8)[np.newaxis]
    if dtype != np.uint8:
        raise InputError(f"model input is {dtype}; Frigate's Edge TPU plugin feeds uint8 (int8 by shifting)")
    return resized[np.newaxis]


FRIGATE_MIN_SCORE = 0.4  # EdgeTpuTfl.min_score
FRIGATE_MAX_DETECTIONS = 20  # EdgeTpuTfl.max_detections


def frigate_ssd_read(interpreter: Any) -> np.ndarray:
    """The detections Frigate's Edge TPU plugin (model_type ssd) reads from an invoked interpreter: float32
    [20, 6] rows of (class id, score, ymin, xmin, ymax, xmax), boxes normalized to the model's input, unused rows 0.

    Its index logic, reproduced step by step (edgetpu_tfl.py, EdgeTpuTfl.__init__ and detect_raw): at start-up the
    output with a 3-D shape is taken as the boxes and the 1-D one as the count (by shape); on each call the two
    other outputs are told apart by whether the first value is a whole number (class ids) or not (scores); then
    the values are read by position all the same: output 0 boxes, 1 class ids, 2 scores, 3 count. Rows are taken
    in order while the score is at least 0.4, at most 20. A model whose outputs are in another order gives
    Frigate wrong rows (or, when position 3 is not the count, an error reading it), as it does here."""
    details = interpreter.get_output_details()
    if len(details) < 4:
        raise InputError(f"the model has {len(details)} outputs; Frigate's SSD reading takes 4 (boxes, class ids, scores, count)")
    boxes_index = count_index = None
    for d in details:  # __init__: by shape
        if len(d["shape"]) == 3:
            boxes_index = d["index"]
        elif len(d["shape"]) == 1:
            count_index = d["index"]
    class_ids_index = scores_index = None
    for d in details[:4]:  # determine_indexes_for_non_yolo_models: whole numbers are class ids
        if d["index"] not in (boxes_index, count_index):
            if np.mod(np.float32(interpreter.tensor(d["index"])()[0][0]), 1) == 0.0:
                class_ids_index = d["index"]
            else:
                scores_index = d["index"]
    del class_ids_index, scores_index  # found, and then not used: detect_raw reads by position
    boxes = interpreter.tensor(details[0]["index"])()[0]
    class_ids = interpreter.tensor(details[1]["index"])()[0]
    scores = interpreter.tensor(details[2]["index"])()[0]
    count = int(interpreter.tensor(details[3]["index"])()[0])
    rows = np.zeros((FRIGATE_MAX_DETECTIONS, 6), np.float32)
    for i in range(count):
        if scores[i] < FRIGATE_MIN_SCORE or i == FRIGATE_MAX_DETECTIONS:
            break
        rows[i] = [class_ids[i], float(scores[i]), boxes[i][0], boxes[i][1], boxes[i][2], boxes[i][3]]
    return rows


CLASSIFIERS = {"pycoral": pycoral_classify, "mediapipe": mediapipe_classify}


# ---------------------------------------------------------------------------------------------
# Detectors (read at the same commits as above: pycoral's pycoral/adapters/detect.py get_objects; MediaPipe's
# mediapipe/tasks/cc/vision/object_detector/object_detector_graph.cc and mediapipe/calculators/util/
# detection_transformation_calculator.cc; Frigate's frigate/util/image.py calculate_region, frigate/util/object.py
# get_min_region_size and create_tensor_input, frigate/video/detect.py detect): what each client feeds for one
# picture, and how it turns the op's boxes (ymin, xmin, ymax, xmax, normalized to the input) into boxes on that
# picture. Every function here returns a Placed; to_image gives the boxes as the client reports them, (xmin, ymin,
# xmax, ymax) in the picture's pixels, and which objects it keeps.


class Placed(NamedTuple):
    """A detector's input as a client feeds it for one picture, and that client's way back to the picture."""

    tensor: np.ndarray  # batch 1: what the client sets on the interpreter
    to_image: Callable[[np.ndarray], Tuple[np.ndarray, np.ndarray]]  # op boxes [K, 4] -> (picture boxes [K, 4], kept [K])
    size: Tuple[int, int]  # (width, height) of the picture the boxes are measured in


def edgeflow_detect(source: Union[Source, np.ndarray], details: Dict[str, Any], contract: Any) -> Placed:
    """`edge detect`'s feed (the model's pixel contract: a stretch, a JPEG decoded at its reduced scale) and its way
    back: each box clipped to the input, then scaled to the picture in float."""
    from edge.answers.detect import image_size

    if isinstance(source, (str, Path, bytes, np.ndarray)):
        size = image_size(source)  # the header only: the contract decodes the file its own way
    else:
        size = _open(source, "edgeflow").size
    return Placed(edgeflow(source, details, contract), partial(_stretched_back, size=size), size)


def _stretched_back(boxes: np.ndarray, size: Tuple[int, int]) -> Tuple[np.ndarray, np.ndarray]:
    width, height = size
    ymin, xmin, ymax, xmax = np.clip(np.asarray(boxes, np.float32).reshape(-1, 4), 0.0, 1.0).astype(np.float64).T
    return np.stack([xmin * width, ymin * height, xmax * width, ymax * height], axis=1), np.ones(len(ymin), bool)


def pycoral_detect_placed(source: Source, details: Dict[str, Any]) -> Placed:
    """detect_image.py's feed (pycoral_detect: the letterbox) and its way back, adapters/detect.py get_objects with
    the scale set_resized_input returned: BBox(xmin, ymin, xmax, ymax).scale(width / scale, height / scale).map(int),
    so each coordinate is truncated to a whole pixel and nothing is clipped (a box reaching into the zero padding
    reaches past the picture)."""
    image = _open(source, "pycoral")
    boxed = pycoral_detect(image, details)
    return Placed(boxed.tensor, partial(pycoral_boxes, input_size=_size(details), scale=boxed.scale), image.size)


def pycoral_boxes(boxes: np.ndarray, input_size: Tuple[int, int], scale: Tuple[float, float]) -> Tuple[np.ndarray, np.ndarray]:
    """The op's boxes as pycoral's get_objects maps them (see pycoral_detect_placed), value by value as it does."""
    width, height = input_size
    sx, sy = width / scale[0], height / scale[1]
    rows = np.asarray(boxes, np.float32).reshape(-1, 4)
    # Scalar by scalar, as BBox.scale multiplies the op's float32 values: the same rounding as pycoral's own numpy.
    out = [[int(sx * xmin), int(sy * ymin), int(sx * xmax), int(sy * ymax)] for ymin, xmin, ymax, xmax in rows]
    return np.array(out, np.float64).reshape(-1, 4), np.ones(len(rows), bool)


def mediapipe_detect(source: Union[Source, np.ndarray], details: Dict[str, Any]) -> Placed:
    """MediaPipe Tasks ObjectDetector's feed and its way back (object_detector_graph.cc at the commit above).

    The detector builds its input with the same ImagePreprocessingGraph as the ImageClassifier, so the feed is
    mediapipe_classify's: the whole picture stretched (keep_aspect_ratio unset), bilinear, not antialiased. Back:
    DetectionProjectionCalculator undoes the stretch, then DetectionTransformationCalculator makes whole pixels:
    origin int(xmin * width) and size int((xmax - xmin) * width) (likewise for y), each truncated and bounded to
    0..width. Not reproduced: DetectionsDeduplicateCalculator, which merges detections with identical pixel boxes
    (the op's non-maximum suppression leaves none)."""
    pixels = mediapipe_pixels(source)
    size = (int(pixels.shape[1]), int(pixels.shape[0]))
    return Placed(mediapipe_classify(pixels, details), partial(mediapipe_boxes, size=size), size)


def mediapipe_boxes(boxes: np.ndarray, size: Tuple[int, int]) -> Tuple[np.ndarray, np.ndarray]:
    width, height = size
    ymin, xmin, ymax, xmax = np.asarray(boxes, np.float32).reshape(-1, 4).T

    def pixels(start, extent, side):  # BoundedValue<int>(relative * side, side): truncated toward 0, then 0..side
        return (np.clip(np.trunc(start * np.float32(side)), 0, side), np.clip(np.trunc(extent * np.float32(side)), 0, side))

    x, w = pixels(xmin, xmax - xmin, width)
    y, h = pixels(ymin, ymax - ymin, height)
    return np.stack([x, y, x + w, y + h], axis=1).astype(np.float64), np.ones(len(x), bool)


def frigate_min_region(model_size: Tuple[int, int]) -> int:
    """Frigate's get_min_region_size (frigate/util/object.py): the model's larger side rounded up to a multiple of
    4, at most 320."""
    largest = max(model_size)
    return 320 if largest >= 320 else (largest + 3) // 4 * 4


def frigate_frame_region(width: int, height: int, model_size: Tuple[int, int]) -> Tuple[int, int, int, int]:
    """The region Frigate's calculate_region (frigate/util/image.py) gives for motion or an object covering the whole
    frame, with multiplier 1 as its start-up regions use: side max(width, height) rounded down to a multiple of 4
    (at least frigate_min_region), centred on the frame and then moved back inside it, so a landscape frame sits at
    the top of its square and a portrait one at the left, the rest black."""
    size = max(width, height) // 4 * 4
    size = max(size, frigate_min_region(model_size))

    def offset(side: int) -> int:
        start = int(side / 2.0 - size / 2.0)
        return 0 if start < 0 else (max(0, side - size) if start > side - size else start)

    x, y = offset(width), offset(height)
    return x, y, x + size, y + size


def frigate_detect_frame(source: Union[Source, np.ndarray], details: Dict[str, Any]) -> Placed:
    """Frigate's Edge TPU SSD path for a still picture taken as one camera frame: its whole-frame region
    (frigate_frame_region), cut and stretched as frigate_detect does, and its way back (frigate/video/detect.py,
    detect): x = int(max(0, box x * side + region x)), the far corner bounded by width - 1 and height - 1, and an
    object whose near corner is at or past the frame's last pixel dropped.

    What a Frigate user's camera does and this does not: regions come from motion (squares of at least
    frigate_min_region around what moved, inside the frame, where objects look larger than in the whole frame),
    the frame is YUV 4:2:0 (see frigate_detect), and objects go on to Frigate's filters and tracker."""
    pixels = source if isinstance(source, np.ndarray) else np.asarray(_open(source, "Frigate").convert("RGB"))
    height, width = pixels.shape[:2]
    region = frigate_frame_region(width, height, _size(details))
    tensor = frigate_detect(pixels, details, region)
    return Placed(tensor, partial(frigate_boxes, region=region, size=(width, height)), (width, height))


def frigate_boxes(boxes: np.ndarray, region: Tuple[int, int, int, int], size: Tuple[int, int]) -> Tuple[np.ndarray, np.ndarray]:
    width, height = size
    side = region[2] - region[0]
    out, kept = [], []
    for ymin, xmin, ymax, xmax in np.asarray(boxes, np.float32).reshape(-1, 4):
        x_min = int(max(0, (xmin * side) + region[0]))
        y_min = int(max(0, (ymin * side) + region[1]))
        x_max = int(min(width - 1, (xmax * side) + region[0]))
        y_max = int(min(height - 1, (ymax * side) + region[1]))
        out.append([x_min, y_min, x_max, y_max])
        kept.append(not (x_min >= width - 1 or y_min >= height - 1))
    return np.array(out, np.float64).reshape(-1, 4), np.array(kept, bool)


DETECTORS = {"pycoral": pycoral_detect_placed, "mediapipe": mediapipe_detect, "frigate": frigate_detect_frame}
