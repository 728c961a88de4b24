"""DSL101: ``Image.open()`` in dataset code whose image is never closed."""

from __future__ import annotations

from dslint.rules.base import WARNING, Invalid, Rule, Symptom
from dslint.rules.handles._common import opened_handles, opener_text, unclosed, with_fix
from dslint.semantics import lifetimes as lt


class UnclosedImageOpen(Rule):
    """
    ## What it does
    Flags `PIL.Image.open(...)` in dataset code (methods of a `Dataset` subclass and
    the functions they call per sample, and the per-example functions given to a
    `datasets`/`webdataset`/`torchdata` dataset's `.set_transform(f)`,
    `.with_transform(f)` or `.map(f)` with the functions of the file they call)
    whose image is not opened in a `with`
    block or closed on all paths, including the common
    `Image.open(path).convert("RGB")` chain.

    ## Why is this bad?
    `Image.open` keeps the file open until the image is loaded *and* Pillow decides
    to close it. Pillow closes single-frame files (JPEG, PNG, single-frame TIFF)
    right after `load()`, which `.convert()` triggers, so the chain does not leak
    descriptors for those. But GIF (even single-frame), APNG, MPO, PSD and
    multi-frame TIFF files stay open until the image is garbage-collected: every
    worker emits `ResourceWarning: unclosed file`, and an image that is kept alive
    keeps its descriptor. An image that is never loaded keeps its file open for as
    long as it lives.

    This rule reports at warning level: for single-frame formats the chain is
    harmless; a handle that is *kept* is reported by DSL103 instead.

    ## Example
    ```python
    class Frames(Dataset):
        def __getitem__(self, i):
            return to_tensor(Image.open(self.paths[i]).convert("RGB"))
    ```

    ## Use instead
    ```python
    class Frames(Dataset):
        def __getitem__(self, i):
            with Image.open(self.paths[i]) as im:
                return to_tensor(im.convert("RGB"))
    ```

    ## Fix safety
    For an image that is never named (`x = Image.open(p).convert("RGB")`,
    `return Image.open(p).copy()`), the fix wraps the statement in
    `with Image.open(p) as im:` and uses `im` in it. It is offered only when
    moving the `Image.open` call in front of its statement changes nothing else
    (no conditional, boolean operator, comprehension or earlier call on the way),
    the new name is unused in the function, and comments are kept. It is safe
    when the statement has read the pixels by its end (a loading method such as
    `.convert()`, `.copy()` or `.resize()` on the image); otherwise, e.g.
    `x = transform(Image.open(p))`, the object built from the image may read the
    file after the block closed it, and the fix is unsafe.

    ## References
    - Pillow: "File handling in Pillow" (`_exclusive_fp`, `load()` closes single-frame files)
    - pytorch/vision#539, python-pillow/Pillow#559
    """

    code = "DSL101"
    name = "unclosed-image-open"
    symptom = Symptom("resource_warnings", "multi-frame images stay open until GC: ResourceWarning in workers")
    level = WARNING
    summary = "`Image.open()` in dataset code is not closed"
    help = "Open the image with `with Image.open(path) as im:` and return data loaded from it"

    valid = (
        """
        from PIL import Image
        from torch.utils.data import Dataset

        class D(Dataset):
            def __getitem__(self, i):
                with Image.open(self.paths[i]) as im:
                    return im.convert("RGB")
        """,
        """
        import io
        from PIL import Image as PILImage
        from torch.utils.data import Dataset

        class D(Dataset):
            def __getitem__(self, i):
                with open(self.paths[i], "rb") as f:
                    return PILImage.open(f).convert("RGB")

            def decode(self, data):
                return PILImage.open(io.BytesIO(data)).convert("RGB")
        """,
        """
        from multiprocessing import Pool
        from PIL import Image
        from torch.utils.data import DataLoader

        def not_dataset_code(p):
            return Image.open(p).convert("RGB")

        def size(p):
            return to_size(Image.open(p))

        with Pool(4) as pool:
            sizes = pool.map(size, PATHS)  # a pool, not a dataset
        loader = DataLoader(sizes)
        """,
        # a per-example function of a datasets object that closes its image
        """
        from datasets import load_dataset
        from PIL import Image
        from torch.utils.data import DataLoader

        def decode(batch):
            out = []
            for p in batch["path"]:
                with Image.open(p) as im:
                    out.append(im.convert("RGB"))
            return {"image": out}

        train = load_dataset("csv", data_files="x.csv")["train"]
        train.set_transform(decode)
        loader = DataLoader(train, batch_size=8)
        """,
        """
        from PIL import Image
        import torch.utils.data as tud

        class D(tud.Dataset):
            def _load(self, p):
                return Image.open(p)  # the caller owns it
        """,
        """
        from PIL import Image
        from torch.utils.data import Dataset

        class D(Dataset):
            def __getitem__(self, i):
                path, label = self.items[i]
                image = Image.open(path)
                if self.mode:
                    image = image.convert(self.mode)
                return image, label  # maybe the opened image itself: the caller owns it
        """,
    )
    invalid = (
        # functions that a `datasets` object runs per example (and the helpers they call)
        """
        from datasets import load_dataset
        from PIL import Image
        from torch.utils.data import DataLoader

        def read(path):
            image = Image.open(path)  # expect: DSL101
            return to_array(image.convert("RGB"))

        def decode(batch):
            batch["image"] = [read(p) for p in batch["path"]]
            return batch

        ds = load_dataset("csv", data_files="x.csv")
        train = ds["train"].shuffle(seed=0)
        train.set_transform(decode)
        sizes = train.map(lambda e: {"size": Image.open(e["path"]).size})  # expect: DSL101
        loader = DataLoader(train, batch_size=8, num_workers=4)
        """,
        Invalid(
            """
            from PIL import Image
            from torch.utils.data import Dataset

            class D(Dataset):
                def __getitem__(self, i):
                    return Image.open(self.paths[i]).convert("RGB")  # expect: DSL101
            """,
            expected_replacement="""
            from PIL import Image
            from torch.utils.data import Dataset

            class D(Dataset):
                def __getitem__(self, i):
                    with Image.open(self.paths[i]) as im:
                        return im.convert("RGB")  # expect: DSL101
            """,
        ),
        """
        from PIL import Image
        from torch.utils.data import Dataset

        class D(Dataset):
            def __getitem__(self, i):
                image = Image.open(self.paths[i])  # expect: DSL101
                image = image.resize((64, 64))
                return image, i  # the resized copy, not the opened image
        """,
        """
        from PIL import Image as I
        import torch.utils.data as tud

        class D(tud.Dataset):
            def __getitem__(self, i):
                img = I.open(self.paths[i])  # expect: DSL101
                return self.transform(img)
        """,
        Invalid(
            """
            import PIL.Image
            from torch.utils.data import IterableDataset

            class Stream(IterableDataset):
                def __iter__(self):
                    for p in self.paths:
                        yield load(p)

            def load(p):
                return PIL.Image.open(p).copy()  # expect: DSL101
            """,
            expected_replacement="""
            import PIL.Image
            from torch.utils.data import IterableDataset

            class Stream(IterableDataset):
                def __iter__(self):
                    for p in self.paths:
                        yield load(p)

            def load(p):
                with PIL.Image.open(p) as im:
                    return im.copy()  # expect: DSL101
            """,
        ),
    )

    def check(self, ctx):
        for call, kind, fate in opened_handles(ctx, ("image",)):
            if not unclosed(ctx, call, fate):
                continue
            text = opener_text(ctx, call)
            if fate.kind == lt.CHAINED and fate.method in lt.IMAGE_LOADING_METHODS:
                message = (
                    f"`{text}` is never closed: Pillow closes single-frame files on load, but GIF, APNG, "
                    "MPO and multi-frame TIFF files stay open until garbage collection (ResourceWarning in "
                    "every worker)"
                )
            else:
                message = (
                    f"`{text}` is never closed: the file stays open until the image is garbage-collected "
                    "(ResourceWarning), and for as long as the image is kept"
                )
            yield self.report(call, message, fix=with_fix(ctx, call, fate, ("im", "image", "pil_image")))
