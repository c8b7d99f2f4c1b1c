# Writes points-N.safetensors: 2 training samples and 1 test sample of N scattered 2-D points,
# fx one channel, y = sin(3 fx) + x0 (the TensorDataset layout of ono-data).
import json, struct, sys
import torch
def write(path, tensors):
    header, blobs, off = {}, [], 0
    for k, t in tensors.items():
        b = t.contiguous().numpy().tobytes()
        header[k] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b); off += len(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h))); f.write(h)
        for b in blobs: f.write(b)
for n in map(int, sys.argv[1:]):
    g = torch.Generator().manual_seed(n)
    pos = torch.rand(1, n, 2, generator=g)
    def split(s):
        fx = torch.randn(s, n, 1, generator=g)
        y = torch.sin(3 * fx) + pos[..., :1]
        return fx, y
    tf, ty = split(2); ef, ey = split(1)
    write(f"points-{n}.safetensors", {"train.fx": tf, "train.y": ty, "train.pos": pos,
                                       "test.fx": ef, "test.y": ey, "test.pos": pos})
