"""What a simulated run is made of: the environments it trains and evaluates on (how their reward
and lengths move over training, the questions their episodes ask, the tools they offer) and the
shape of an RL run. The four demo runs themselves are defined in `runs`."""
from __future__ import annotations

import uuid
import zlib
from dataclasses import dataclass


@dataclass(frozen=True)
class EnvSpec:
    """One verifiers environment. `*0` values hold at step 0, `*1` values at the end of training."""

    task: str
    reward: str
    binary: bool
    r0: float
    r1: float
    out0: float
    out1: float
    turns0: float
    turns1: float
    in_tok: float
    max_tokens: int
    metrics: tuple[str, ...] = ()
    err_rate: float = 0.0
    system: str = ""


ENVS = {
    "math-python": EnvSpec("MathPythonTask", "correct_answer", True, 0.36, 0.81, 880, 560, 2.7, 1.8, 380, 2048,
                           ("num_tool_calls", "num_python_errors"), 0.01,
                           "Solve the problem. You can run Python with the `python` tool. Put the final answer in \\boxed{}."),
    "wiki-search": EnvSpec("WikiSearchTask", "correct_answer", True, 0.22, 0.64, 420, 340, 4.3, 3.4, 520, 1024,
                           ("num_tool_calls",), 0.004,
                           "Answer the question using the Wikipedia tools. Reply with a short final answer."),
    "gsm8k": EnvSpec("GSM8KTask", "correct_answer", True, 0.80, 0.92, 260, 210, 1, 1, 120, 2048, (), 0.0,
                     "Solve the math word problem step by step and put the final answer in \\boxed{}."),
    "reverse-text": EnvSpec("ReverseTextTask", "lcs", False, 0.16, 0.87, 95, 72, 1, 1, 96, 512, (), 0.0,
                            "Reverse the text character by character."),
    "acereason-math": EnvSpec("MathTask", "correct_answer", True, 0.29, 0.52, 2500, 3300, 1, 1, 150, 8192, (), 0.002,
                              "Solve the problem. Put the final answer in \\boxed{}."),
    "math500": EnvSpec("MathTask", "correct_answer", True, 0.56, 0.68, 2300, 2900, 1, 1, 140, 8192, (), 0.0,
                       "Solve the problem. Put the final answer in \\boxed{}."),
}

# (question, answer, aux) per env; aux is the Python code (math-python) or the page id (wiki-search).
QUESTIONS = {
    "math-python": [("What is the sum of all primes below 100?", "1060", "print(sum(p for p in range(2, 100) if all(p % d for d in range(2, p))))"),
                    ("How many positive divisors does 360 have?", "24", "print(sum(1 for d in range(1, 361) if 360 % d == 0))"),
                    ("What is 17^5 mod 23?", "21", "print(pow(17, 5, 23))"),
                    ("What is the 20th Fibonacci number?", "6765", "a, b = 0, 1\nfor _ in range(20):\n    a, b = b, a + b\nprint(a)"),
                    ("How many integers from 1 to 1000 are divisible by 3 or 7?", "428", "print(sum(1 for i in range(1, 1001) if i % 3 == 0 or i % 7 == 0))"),
                    ("What is the least common multiple of 12, 18 and 30?", "180", "import math\nprint(math.lcm(12, 18, 30))")],
    "wiki-search": [("Who composed the opera The Magic Flute?", "Wolfgang Amadeus Mozart", "the_magic_flute"),
                    ("In which year did the Berlin Wall fall?", "1989", "berlin_wall"),
                    ("What is the capital of Australia?", "Canberra", "australia"),
                    ("Who painted the ceiling of the Sistine Chapel?", "Michelangelo", "sistine_chapel"),
                    ("What is the tallest mountain in Africa?", "Mount Kilimanjaro", "mount_kilimanjaro")],
    "gsm8k": [("Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
               "How many clips did Natalia sell altogether in April and May?", "72", ""),
              ("Weng earns $12 an hour for babysitting. Yesterday, she just did 50 minutes of babysitting. "
               "How much did she earn?", "10", ""),
              ("James writes a 3-page letter to 2 different friends twice a week. How many pages does he write a year?", "624", ""),
              ("A robe takes 2 bolts of blue fiber and half that much white fiber. How many bolts in total does it take?", "3", "")],
    "reverse-text": [("The quick brown fox jumps over the lazy dog", "", ""),
                     ("Reinforcement learning rewards good behaviour", "", ""),
                     ("Paris is the capital of France", "", ""),
                     ("A journey of a thousand miles begins with a single step", "", ""),
                     ("Light travels faster than sound", "", "")],
    "acereason-math": [("How many ordered pairs (a, b) of positive integers satisfy a + b = 30 and gcd(a, b) = 1?", "8", ""),
                       ("What is the remainder when 2^100 is divided by 7?", "2", ""),
                       ("How many trailing zeros does 100! have?", "24", ""),
                       ("What is the sum of the interior angles of a convex 12-gon, in degrees?", "1800", "")],
    "math500": [("If x + 1/x = 3, what is x^2 + 1/x^2?", "7", ""),
                ("What is the smallest positive integer n with 17n = 1 (mod 83)?", "44", ""),
                ("Simplify sqrt(242).", "11\\sqrt{2}", "")],
}

_PY_TOOL = {"type": "function", "name": "python", "description": "Run Python code and return its stdout.",
            "parameters": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}}
_WIKI_TOOLS = [
    {"type": "function", "name": "search_pages", "description": "Search Wikipedia titles; returns the top page ids.",
     "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}},
    {"type": "function", "name": "read_section", "description": "Read one section of a page.",
     "parameters": {"type": "object", "properties": {"section_id": {"type": "string"}}, "required": ["section_id"]}},
]


def tools_of(env: str) -> list[dict]:
    """The tool schemas an env's episodes offer the model (none for single-turn envs)."""
    return [_PY_TOOL] if env == "math-python" else list(_WIKI_TOOLS) if env == "wiki-search" else []


@dataclass(frozen=True)
class RLRunSpec:
    """One simulated prime-rl RL run: its name and model, its envs, and the knobs its curves use."""

    name: str
    model: str
    train_envs: tuple[str, ...]
    eval_envs: tuple[str, ...]
    max_steps: int
    salt: int
    step_s: float  # mean orchestrator seconds per step
    groups: int  # tasks per env per step
    k: int  # rollouts per example
    lr: float
    warmup: int
    eval_interval: int
    eval_examples: int
    eval_k: int
    ckpt_interval: int
    params_b: float
    mem_gib: float
    gpus_train: int = 2
    gpus_infer: int = 2
    tau: float = 120.0  # reward time constant (steps)
    toml_path: str = "rl.toml"

    @property
    def batch_size(self) -> int:
        return self.groups * self.k * len(self.train_envs)

    @property
    def run_id(self) -> str:
        return uuid.UUID(int=zlib.crc32(self.name.encode()) * 2654435761 % (1 << 128)).hex

    def env_ports(self) -> list[tuple[str, str, int]]:
        """(split, env, port) of each env server: train envs first, ports counting up from 5501."""
        splits = [("train", env) for env in self.train_envs] + [("eval", env) for env in self.eval_envs]
        return [(split, env, 5501 + i) for i, (split, env) in enumerate(splits)]
