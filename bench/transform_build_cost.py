"""What building a torchvision transform pipeline per sample costs (DSL203's preview form).

Times, on one thread, building a four-step ``Compose`` (random resized crop, flip, to-tensor,
normalize) alone, and a whole sample (decode a 500x375 JPEG held in memory, convert, transform)
with the pipeline built inside the sample against built once. Needs Pillow and a torchvision that
matches the installed torch (``pip install torchvision --no-deps``); only the pure-Python
transforms are used, so a build whose compiled operators do not match torch is still usable here
(their registration is skipped).

    python bench/transform_build_cost.py
"""

from __future__ import annotations

import io
import statistics
import sys
import time
import types


def _transforms():
    try:
        import torchvision.transforms as T
    except RuntimeError:  # compiled operators built for another torch: the transforms do not need them
        for name in [m for m in sys.modules if m.startswith("torchvision")]:
            del sys.modules[name]
        sys.modules["torchvision._meta_registrations"] = types.ModuleType("torchvision._meta_registrations")
        import torchvision.transforms as T
    return T


def _median_us(func, rounds: int) -> float:
    for _ in range(20):
        func()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def main() -> int:
    import numpy as np
    import torch
    from PIL import Image

    torch.set_num_threads(1)
    T = _transforms()
    pixels = np.random.default_rng(0).integers(0, 255, (375, 500, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "JPEG", quality=90)
    data = buffer.getvalue()

    def build():
        return T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                          T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])

    once = build()

    def built_per_sample():
        return build()(Image.open(io.BytesIO(data)).convert("RGB"))

    def built_once():
        return once(Image.open(io.BytesIO(data)).convert("RGB"))

    cost = _median_us(build, 2000)
    per_sample = _median_us(built_per_sample, 300)
    reused = _median_us(built_once, 300)
    print(f"torch {torch.__version__}, one thread")
    print(f"building the pipeline: {cost:.1f} us")
    print(f"a sample, pipeline built per sample: {per_sample:.0f} us; built once: {reused:.0f} us "
          f"(building is {100 * cost / reused:.1f}% of a sample)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
