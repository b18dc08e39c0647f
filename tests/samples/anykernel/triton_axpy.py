"""A Triton program: a @triton.jit kernel compiled at run time and loaded
through the driver as a cubin, on PyTorch tensors. Prints a digest of its
result."""

import hashlib

import torch
import triton
import triton.language as tl


@triton.jit
def axpy(y_ptr, x_ptr, a, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(y_ptr + offsets, a * x + y * 0.5, mask=mask)


n = 1 << 20
x = torch.arange(n, dtype=torch.float32, device="cuda") * 1e-3
y = torch.ones(n, dtype=torch.float32, device="cuda")
for _ in range(3):
    axpy[(triton.cdiv(n, 1024),)](y, x, 0.25, n, BLOCK=1024)
torch.cuda.synchronize()
print("checksum", hashlib.sha256(y.cpu().numpy().tobytes()).hexdigest()[:16])
