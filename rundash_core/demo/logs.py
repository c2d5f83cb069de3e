"""Log lines as prime-rl's processes write them (prime-rl spec 3.2): loguru records with ANSI colours for the
trainer and orchestrator, vLLM's own format and its access log for the inference server, and plain
`logging` lines for the env servers. Step messages are shared by the written runs and the live writer."""
from __future__ import annotations

import time

_LEVEL_CODE = {"INFO": "\x1b[1m", "WARNING": "\x1b[33m\x1b[1m", "SUCCESS": "\x1b[32m\x1b[1m",
               "DEBUG": "\x1b[34m\x1b[1m", "ERROR": "\x1b[31m\x1b[1m", "TRACE": "\x1b[36m\x1b[1m"}


def loguru(t: float, level: str, msg: str) -> str:
    """A loguru line exactly as prime-rl writes it with colorize=True (prime-rl spec 3.2)."""
    c = _LEVEL_CODE[level]
    hms = time.strftime("%H:%M:%S", time.localtime(t))
    return f"\x1b[2m{hms}\x1b[0m {c}{level:>7}\x1b[0m {c}\x1b[22m{msg}\x1b[0m\x1b[0m\n"


def vllm(t: float, msg: str, pid: int = 3134, where: str = "loggers.py:123") -> str:
    return f"(APIServer pid={pid}) INFO {time.strftime('%m-%d %H:%M:%S', time.localtime(t))} [{where}] {msg}\n"


def access(route: str) -> str:
    return f'(APIServer pid=3134) INFO:     127.0.0.1:53574 - "POST {route} HTTP/1.1" 200 OK\n'


def plain(t: float, msg: str) -> str:
    return f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(t))} INFO {msg}\n"


def render(t: float, kind: str, payload: tuple) -> str:
    """A recorded log event (`kind` names the format, `payload` its arguments after the time)."""
    if kind == "loguru":
        return loguru(t, *payload)
    if kind == "vllm":
        return vllm(t, *payload)
    if kind == "access":
        return access(*payload)
    return plain(t, *payload)


def trainer_step_msg(step: int, lg: dict) -> str:
    return (f"Step {step} | Time: {lg['time']:.2f}s | Loss: {lg['loss']:.4f} | Entropy: {lg['entropy']:.4f} | "
            f"Mismatch KL: {lg['kl']:.4f} | Grad. Norm: {lg['gn']:.4f} | LR: {lg['lr']:.2e} | "
            f"Throughput: {lg['thr']:.0f} tokens/s | MFU: {lg['mfu']:.1f}% | Peak Mem.: {lg['mem']:.1f} GiB")


def orch_step_msg(step: int, sm: dict) -> str:
    return (f"Step {step} | Time: {sm['time']:.2f}s | Reward: {sm['reward']:.4f} | "
            f"Throughput: {sm['tokens'] / sm['time']:.1f} tokens/s | Seq. Length: {sm['seq']:.1f} tokens/sample | "
            f"Async Level: 1 | Max. Off-Policy Level: 1")


def batch_received_msg(step: int, samples: int) -> str:
    return f"Received training batch for step {step} ({samples} samples)"


def eval_done_msg(env: str, step: int, k: int, sm: dict, seconds: float) -> str:
    return (f"Evaluated {env} at step {step} | avg@{k}: {sm['avg']:.4f} | "
            f"pass@{k}: {sm['pass']:.4f} | Time: {seconds:.2f}s")


_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.82 GiB. GPU 1 has a total capacity of 79.19 GiB "
        "of which 2.41 GiB is free. Including non-PyTorch memory, this process has 76.77 GiB memory in use.")
_FAILED_IN_BACKWARD = ("Training failed with an uncaught exception\nTraceback (most recent call last):\n"
                       '  File "/workspace/prime-rl/src/prime_rl/trainer/rl/train.py", line 418, in train\n'
                       "    loss.backward()\n")
# The trainer's ERROR record (with torch's frame) and what rank 1 left on its stderr.
OOM_TRACEBACK = (_FAILED_IN_BACKWARD
                 + '  File "/workspace/prime-rl/.venv/lib/python3.12/site-packages/torch/_tensor.py", line 647, in backward\n'
                 "    torch.autograd.backward(\n" + _OOM)
OOM_STDERR = _FAILED_IN_BACKWARD + _OOM + "\n"
