"""Preset-or-file resolution and TOML reading, shared by hardware and engine files."""

import pathlib

from ..errors import parse_toml, path_exists, read_text, unknown_name


def read_toml(name_or_path, kind, preset_dir, slugs):
    """(parsed dict, slug, path) of a preset named by slug (in `preset_dir`) or of a user's TOML file.
    Every failure is a one-line `SpecError` naming the `kind` of file."""
    s = str(name_or_path)
    path = pathlib.Path(s)
    if not (path.suffix == ".toml" or path_exists(path)):
        if s not in slugs:
            raise unknown_name(kind, s, slugs)
        path, slug = preset_dir / f"{s}.toml", s
    else:
        slug = path.stem
    text = read_text(path, f"{kind} file", 1 << 20)
    return parse_toml(text, f"{kind} file {str(path)!r}"), slug, str(path)
