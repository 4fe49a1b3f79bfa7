"""A spec file whose parameters refuse an odd big jug (ValueError), loaded by path by the tests."""
from dataclasses import dataclass
from kraftcheck.specs.die_hard import DieHard, DieHardParams

@dataclass(frozen=True)
class EvenParams(DieHardParams):
    def __post_init__(self):
        if self.big % 2:
            raise ValueError("the big jug must hold an even number of gallons")

class EvenJugs(DieHard):
    name = "even_jugs"
    Params = EvenParams
