"""DSL101: ``Image.open()`` per sample whose open file costs more than a ResourceWarning."""

from __future__ import annotations

from dslint.rules.base import WARNING, Invalid, Rule, Symptom
from dslint.rules.handles._common import KEPT, MULTI_FRAME, opener_text, unclosed_handles, with_fix

PAGES = """# a class without a torch base whose pages are concatenated (or only listed) per book
from PIL import Image
from torch.utils.data import ConcatDataset
class Pages:
    def __len__(self): return len(self.paths)
    def __getitem__(self, i): return Image.open(self.paths[i]).size{expect}
def build(books):
    parts = []
    for book in books: parts.append(Pages(book))
    return {use}
"""


class UnclosedImageOpen(Rule):
    """
    ## What it does
    Flags `PIL.Image.open(...)` in per-sample dataset code (`__getitem__`, the yielding
    loop of `__iter__`, the functions they call, and the per-example functions given to
    a `datasets`/`webdataset`/`torchdata` dataset's `.set_transform(f)`,
    `.with_transform(f)` or `.map(f)`) whose image is not closed and whose open file
    has a runtime consequence:

    - the image is never loaded: only `.size`, `.info` or the like are read
      (`Image.open(p).size`), so Pillow never closes the file;
    - a new image is kept on `self` on every sample;
    - the code handles multi-frame formats: a GIF, MPO or APNG path or extension in a string
      of the file, outside its other classes (not one it only writes: `.save(f"{n}.gif")`),
      `seek`, `n_frames`, `is_animated` or `PIL.ImageSequence`. Pillow keeps those files open after loading. A TIFF
      extension alone is not enough: Pillow closes a single-frame TIFF when it
      loads it, and only the frame attributes show a TIFF stack.

    ## Why is this bad?
    `Image.open` reads the header and keeps the file open. Pillow closes a single-frame
    file (JPEG, PNG, single-frame TIFF) as soon as it loads the pixels, but it keeps
    GIF, APNG, MPO and multi-frame TIFF files open after loading (to seek to other
    frames), and it never closes an image that is never loaded. Measured with Pillow
    13: such a file is released only when the image is dropped, each one with
    `ResourceWarning: unclosed file` in the worker, so a multi-frame dataset warns on
    every sample; an image kept alive (on `self`) keeps its descriptor (in a container: DSL103).

    ## When it does not fire
    - `Image.open(p).convert("RGB")`, or an image loaded on a later statement or
      handed to a transform or `np.array`, in code that shows no multi-frame
      format: Pillow loads and closes JPEG/PNG files, nothing stays open. These
      forms are DSL104's (opt-in), with the same fix.
    - An image opened once (in `__init__`, a setup method, a script): DSL104's.
    - `Image.open` on an in-memory buffer (`io.BytesIO`, an element of a `self` list
      of them), or on a file object the code opened and closes.
    - An image returned to the caller (`return image, label`): the caller owns it.
      A call to a function that returns the image it opens (of this file, of
      another module, or a method on an object whose class the file names) is
      judged where it is called, as an `Image.open` there.
    - Code that is not dataset code (a `multiprocessing.Pool` job, a script). A class
      without a torch base is dataset code when a `DataLoader` or `ConcatDataset`
      receives it (in a list, a comprehension, `parts.append(...)`).

    ## Example
    ```python
    class Frames(Dataset):
        def __getitem__(self, i):
            return to_tensor(Image.open(self.gif_paths[i]).convert("RGB"))
    ```

    ## Use instead
    ```python
    class Frames(Dataset):
        def __getitem__(self, i):
            with Image.open(self.gif_paths[i]) as im:
                return to_tensor(im.convert("RGB"))
    ```

    ## Fix safety
    For an image that is never named (`x = Image.open(p).convert("RGB")`, `return
    Image.open(p).copy()`), the fix wraps the statement in `with Image.open(p) as im:`
    and uses `im` in it. It is offered only when moving the `Image.open` call in front
    of its statement changes nothing else (no conditional, boolean operator,
    comprehension or earlier call on the way), the new name is unused in the function,
    and comments are kept. It is safe when the statement has read the pixels by its
    end (a loading method such as `.convert()`, `.copy()` or `.resize()` on the
    image); otherwise, e.g. `x = transform(Image.open(p))`, the object built from the
    image may read the file after the block closed it, and the fix is unsafe.

    ## References
    - Pillow: "File handling in Pillow" (`_exclusive_fp`, `load()` closes single-frame files)
    - pytorch/vision#539, python-pillow/Pillow#559
    """

    code = "DSL101"
    name = "unclosed-image-open"
    symptom = Symptom("resource_warnings", "multi-frame images stay open until GC: ResourceWarning in workers")
    level = WARNING
    summary = "`Image.open()` per sample is not closed and its file stays open"
    help = "Open the image with `with Image.open(path) as im:` and return data loaded from it"

    valid = (
        PAGES.format(expect="", use="{book: len(p) for book, p in zip(books, parts)}"),
        """
        import io
        import six
        from PIL import Image
        from torch.utils.data import Dataset

        class D(Dataset):
            def __init__(self, palette_path):
                self.palette = Image.open(palette_path).getpalette()  # once: DSL104's

            def __getitem__(self, i):
                with Image.open(self.paths[i]) as im:
                    frame = im.convert("RGB")
                with open(self.paths[i], "rb") as f:
                    other = Image.open(f).convert("RGB")
                buf = six.BytesIO()
                buf.write(self.blobs[i])
                return frame, other, Image.open(buf).convert("L"), Image.open(io.BytesIO(self.raw[i])).size
        """,
        # JPEG/PNG data: loaded and closed by Pillow (DSL104's, opt-in)
        """
        from PIL import Image
        from torch.utils.data import Dataset

        EXTENSIONS = (".jpg", ".png")

        class D(Dataset):
            def __getitem__(self, i):
                image = Image.open(self.paths[i])
                if image.mode != "RGB":
                    image = image.convert("RGB")
                mask = self.transform(Image.open(self.masks[i]))
                return np.array(image), mask, Image.open(self.thumbs[i]).convert("RGB")
        """,
        # a TIFF extension alone: Pillow closes a single-frame TIFF when it loads it (DSL104's)
        """
        from PIL import Image
        from torch.utils.data import Dataset

        EXTENSIONS = ("jpg", "png", "tif", "tiff")

        class D(Dataset):
            def __getitem__(self, i):
                return self.transform(Image.open(self.paths[i]).convert("RGB"))
        """,
        """
        from multiprocessing import Pool
        from PIL import Image
        from torch.utils.data import DataLoader

        def size(p):
            return Image.open(p).size

        with Pool(4) as pool:
            sizes = pool.map(size, PATHS)  # a pool, not a dataset
        loader = DataLoader(sizes)
        """,
        """
        from PIL import Image
        from torch.utils.data import Dataset

        class D(Dataset):
            def _load(self, p):
                return Image.open(p)  # the caller owns it

            def __getitem__(self, i):
                path, label = self.items[i]
                image = Image.open(path)
                if self.mode:
                    image = image.convert(self.mode)
                thumb = self._load(self.thumbs[i]).convert("L")  # loaded: DSL104's
                return image, label, thumb  # maybe the opened image itself: the caller owns it
        """,
    )
    invalid = (
        PAGES.format(expect="  # expect: DSL101", use="ConcatDataset([Pages(b) for b in extra] + parts)"),
        # never loaded, per example of a `datasets` object
        """
        from datasets import load_dataset
        from PIL import Image
        from torch.utils.data import DataLoader

        ds = load_dataset("csv", data_files="x.csv")
        train = ds["train"].shuffle(seed=0)
        sizes = train.map(lambda e: {"size": Image.open(e["path"]).size})  # expect: DSL101
        loader = DataLoader(train, batch_size=8, num_workers=4)
        """,
        Invalid(
            """
            import glob
            from PIL import Image
            from torch.utils.data import Dataset

            class D(Dataset):
                def __init__(self, root):
                    self.paths = sorted(glob.glob(root + "/*.gif"))

                def __getitem__(self, i):
                    return Image.open(self.paths[i]).convert("RGB")  # expect: DSL101
            """,
            expected_replacement="""
            import glob
            from PIL import Image
            from torch.utils.data import Dataset

            class D(Dataset):
                def __init__(self, root):
                    self.paths = sorted(glob.glob(root + "/*.gif"))

                def __getitem__(self, i):
                    with Image.open(self.paths[i]) as im:
                        return im.convert("RGB")  # expect: DSL101
            """,
        ),
        """
        from PIL import Image as I
        import torch.utils.data as tud

        class D(tud.Dataset):
            def __getitem__(self, i):
                self.current = I.open(self.paths[i])  # expect: DSL101
                img = I.open(self.paths[i])  # expect: DSL101
                frame = img.seek(i % img.n_frames)
                return self.transform(img.convert("RGB")), self.current.size
        """,
        Invalid(
            """
            import PIL.Image
            from torch.utils.data import IterableDataset

            EXTENSIONS = ["png", "gif"]

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

            EXTENSIONS = ["png", "gif"]

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

    invalid += (
        # a helper of the file returns the image it opens; the caller never loads it
        """
        from PIL import Image
        from torch.utils.data import Dataset

        def read_image(path):
            return Image.open(path)

        class D(Dataset):
            def __getitem__(self, i):
                width, height = read_image(self.paths[i]).size  # expect: DSL101
                return width / height
        """,
    )

    def check(self, ctx):
        for call, _, fate, why in unclosed_handles(ctx, ("image",)):
            if why is None:
                continue
            text = opener_text(ctx, call)
            if why == MULTI_FRAME:
                message = (
                    f"{text} is never closed, and this code handles multi-frame images (GIF/MPO/APNG, TIFF stacks): "
                    "Pillow keeps those files open after loading, until the image is dropped, with a "
                    "ResourceWarning on every sample"
                )
            elif why == KEPT:
                message = (
                    f"{text} keeps a new unclosed image on `self` on every sample: its file stays open "
                    "until the next sample replaces it (a ResourceWarning each time)"
                )
            else:
                message = (
                    f"{text} is never loaded or closed: Pillow keeps the file open for as long as the image "
                    "lives, whatever the format (a ResourceWarning on every sample)"
                )
            fix = None if why == KEPT else with_fix(ctx, call, fate, ("im", "image", "pil_image"))
            yield self.report(call, message, fix=fix)
