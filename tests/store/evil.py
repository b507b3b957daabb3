"""A value whose unpickling runs code (creates the folder it names): what a malicious store holds."""

import os


class Evil:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (os.mkdir, (self.marker,))
