"""Makes torchvision importable beside the CPU-only torch wheel, in .ci/ultralytics-env's side venv only.

PyPI's torchvision 0.28 is built against torch's CUDA wheel: its C extension needs libc10_cuda.so, which the CPU-only
torch 2.13.0+cpu lacks, so `import torchvision` stops at registering the `torchvision::nms` op it could not load.
Before torchvision is first imported, this defines that op (and `qnms`, also registered unconditionally) with a
plain-torch CPU implementation, and lets torchvision.ops.boxes call it (its check for the C extension is waived there
only): non-maximum suppression is all Ultralytics uses of torchvision's ops (its validator).
Loaded by a .pth file the env script writes; it touches nothing until something imports torchvision."""
import importlib.abc
import sys

_LIBRARY = []


def _nms(dets, scores, iou_threshold):
    import torch

    order = scores.argsort(descending=True)
    boxes = dets[order]
    areas = (boxes[:, 2] - boxes[:, 0]).clamp(min=0) * (boxes[:, 3] - boxes[:, 1]).clamp(min=0)
    alive = torch.ones(len(order), dtype=torch.bool)
    keep = []
    for i in range(len(order)):
        if not alive[i]:
            continue
        keep.append(i)
        lt = torch.maximum(boxes[i, :2], boxes[i + 1:, :2])
        rb = torch.minimum(boxes[i, 2:], boxes[i + 1:, 2:])
        inter = (rb - lt).clamp(min=0).prod(dim=1)
        iou = inter / (areas[i] + areas[i + 1:] - inter).clamp(min=1e-9)
        alive[i + 1:] &= iou <= iou_threshold
    return order[torch.tensor(keep, dtype=torch.long)]


def _define():
    import torch

    lib = torch.library.Library("torchvision", "DEF")
    lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    lib.impl("nms", _nms, "CPU")
    _LIBRARY.append(lib)  # the definitions live as long as the library object


class _Patched(importlib.abc.Loader):
    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        module._assert_has_ops = lambda: None  # its nms now has the CPU implementation above


class _FirstImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "torchvision":
            _define()
        if name == "torchvision.ops.boxes":
            sys.meta_path.remove(self)
            import importlib.machinery

            spec = importlib.machinery.PathFinder.find_spec(name, path)
            spec.loader = _Patched(spec.loader)
            return spec
        return None


sys.meta_path.insert(0, _FirstImport())
