"""The IPython magics: parse a cell into a turn request, run it, render the answer."""
