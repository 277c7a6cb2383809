"""Files as the kubelet mounts them: ConfigMap, Secret, service-account token
and projected volumes.

The kubelet's atomic writer never writes a key in place. Each update makes a
new directory "..<UTC timestamp>.<random>" holding every key, points a fresh
link "..data_tmp" at it, renames that over "..data" (the one atomic step), and
keeps one link per key, "<key> -> ..data/<key>", at the top; the previous
timestamped directory is then removed. A reader that refuses symlinks, or
that caches an inode, breaks on exactly this layout, which is why every test
that hands the driver a mounted file goes through write().

    write(dir, {"config.yaml": "..."})   first write and every update alike
"""
import os
import shutil
import tempfile
import time


def write(directory, files, mode=0o644):
    """Lays out (or updates in place) a kubelet volume at directory holding
    files ({key: str or bytes}); returns the new timestamped directory."""
    os.makedirs(directory, exist_ok=True)
    data = os.path.join(directory, "..data")
    old = os.readlink(data) if os.path.islink(data) else None
    stamp = time.strftime("..%Y_%m_%d_%H_%M_%S.", time.gmtime())
    ts = tempfile.mkdtemp(prefix=stamp, dir=directory)
    os.chmod(ts, 0o755)
    for key, value in files.items():
        path = os.path.join(ts, key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as fh:
            fh.write(value.encode() if isinstance(value, str) else value)
        os.chmod(path, mode)
    tmp = os.path.join(directory, "..data_tmp")
    os.symlink(os.path.basename(ts), tmp)
    os.rename(tmp, data)
    for key in files:
        top = key.split("/", 1)[0]
        link = os.path.join(directory, top)
        if not os.path.islink(link):
            os.symlink(os.path.join("..data", top), link)
    if old:
        gone = set(os.listdir(os.path.join(directory, old))) - {k.split("/", 1)[0] for k in files}
        for top in gone:
            link = os.path.join(directory, top)
            if os.path.islink(link):
                os.unlink(link)
        shutil.rmtree(os.path.join(directory, old))
    return ts


def path(directory, key):
    """The path a container sees for key: the top-level link."""
    return os.path.join(directory, key)
