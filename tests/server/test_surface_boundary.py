"""gateway.server.surface.boundary_of: the same boundaries, and the same 400s, as aiohttp's reading it replaced.

boundary_of read the Content-Type with aiohttp.helpers.parse_mimetype, a helper outside that
module's public names. Its own reading must take exactly the values parse_mimetype took: compared
here on what real clients send, on drawn Content-Types shaped like theirs (case, quotes, spaces,
other parameters, repeats), and on any text at all.
"""

from __future__ import annotations

from typing import Final

import pytest
from aiohttp import helpers
from hypothesis import example, given
from hypothesis import strategies as st

from gateway.core.errors import InvalidRequestError
from gateway.server.surface import boundary_of

Outcome = bytes | tuple[str, str | None, str | None]  # a boundary, or the 400's message, param and code

parse_mimetype: Final = getattr(helpers, "parse_mimetype", None)
needs_aiohttp_reading = pytest.mark.skipif(parse_mimetype is None, reason="this aiohttp has no parse_mimetype")

REAL_CLIENTS: Final = [
    "multipart/form-data; boundary=8b2c3f1a9d4e4b7f9a0c1d2e3f4a5b6c",  # httpx (the openai SDK), urllib3
    "multipart/form-data; boundary=----formdata-undici-012345678901",  # undici (openai-node)
    "multipart/form-data; boundary=----WebKitFormBoundary7MA4YWxkTrZu0gW",  # browsers
    "multipart/form-data; boundary=------------------------d74496d66958873e",  # curl
    'multipart/form-data; boundary="7b3c0f1e-4a5d-4e8f-9b2a-1c3d5e7f9a0b"',  # .NET HttpClient, quoted
    "multipart/form-data; boundary=1f0e3dad99908345f7439f8ffabdffc4b2b1b5c4bd3e1e3c2b1a0f9e8d7c",  # Go
    "multipart/form-data; charset=utf-8; boundary=4f1c2d3e-5a6b",  # okhttp and others, a charset first
    "Multipart/Form-Data; Boundary=XyZ",
    "multipart/form-data;boundary=XyZ",
    'multipart/form-data; boundary="a b"',
    'multipart/form-data; boundary="a;b"',
    "multipart/form-data; boundary=a=b",
    "multipart/form-data; boundary=first; boundary=second",
    "multipart/form-data+xml; boundary=XyZ",
    "multipart/form-data; boundary=",
    'multipart/form-data; boundary=""',
    "multipart/form-data; boundary",
    "multipart/form-data",
    "multipart/mixed; boundary=XyZ",
    "multipart/form-data/x; boundary=XyZ",
    "form-data; boundary=XyZ",
    "application/json",
    "*",
    "",
    ";;;",
]


def aiohttp_boundary_of(content_type: str) -> bytes:
    """The boundary as boundary_of found it before: read by aiohttp's parse_mimetype."""
    assert parse_mimetype is not None
    mime = parse_mimetype(content_type)
    boundary = mime.parameters.get("boundary", "")
    if (mime.type, mime.subtype) != ("multipart", "form-data") or not boundary:
        raise InvalidRequestError(
            "The request body must be multipart/form-data (with a boundary).", param="Content-Type", code="invalid_body"
        )
    return str(boundary).encode()


def outcome(read: object, content_type: str) -> Outcome:
    assert callable(read)
    try:
        found = read(content_type)
    except InvalidRequestError as refused:
        assert refused.status == 400
        return refused.message, refused.param, refused.code
    assert isinstance(found, bytes)
    return found


def test_what_real_clients_send_is_read_as_before() -> None:
    assert [boundary_of(content_type) for content_type in REAL_CLIENTS[:7]] == [
        b"8b2c3f1a9d4e4b7f9a0c1d2e3f4a5b6c",
        b"----formdata-undici-012345678901",
        b"----WebKitFormBoundary7MA4YWxkTrZu0gW",
        b"------------------------d74496d66958873e",
        b"7b3c0f1e-4a5d-4e8f-9b2a-1c3d5e7f9a0b",
        b"1f0e3dad99908345f7439f8ffabdffc4b2b1b5c4bd3e1e3c2b1a0f9e8d7c",
        b"4f1c2d3e-5a6b",
    ]


@pytest.mark.parametrize(
    ("content_type", "boundary"),
    [
        ("Multipart/Form-Data; Boundary=XyZ", b"XyZ"),  # type and names in any case; the value as sent
        ("multipart/form-data;boundary=XyZ", b"XyZ"),
        ('multipart/form-data; boundary="a b"', b"a b"),
        ('multipart/form-data; boundary="a;b"', b"a"),  # split at every ";", quoted or not
        ("multipart/form-data; boundary=a=b", b"a=b"),
        ("multipart/form-data; boundary=first; boundary=second", b"first"),
        ("multipart/form-data+xml; boundary=XyZ", b"XyZ"),  # a +suffix is not the subtype
        ('multipart/form-data; boundary= "XyZ" ', b"XyZ"),  # spaces and double quotes stripped...
        ('multipart/form-data; boundary="XyZ', b"XyZ"),
        ("multipart/form-data; boundary=\tXyZ\t", b"\tXyZ\t"),  # ...and nothing else
    ],
)
def test_quotes_case_and_repeats_are_read_as_before(content_type: str, boundary: bytes) -> None:
    assert boundary_of(content_type) == boundary


@pytest.mark.parametrize("content_type", [c for c in REAL_CLIENTS if c.endswith(("boundary=", '""', "boundary"))] + REAL_CLIENTS[-8:])
def test_no_boundary_or_another_type_is_the_same_400(content_type: str) -> None:
    with pytest.raises(InvalidRequestError) as refused:
        boundary_of(content_type)
    assert (refused.value.status, refused.value.param, refused.value.code) == (400, "Content-Type", "invalid_body")
    assert refused.value.message == "The request body must be multipart/form-data (with a boundary)."


@needs_aiohttp_reading
@pytest.mark.parametrize("content_type", REAL_CLIENTS)
def test_each_listed_content_type_reads_as_aiohttp_read_it(content_type: str) -> None:
    assert outcome(boundary_of, content_type) == outcome(aiohttp_boundary_of, content_type)


def _cased(text: str) -> st.SearchStrategy[str]:
    return st.lists(st.booleans(), min_size=len(text), max_size=len(text)).map(
        lambda upper: "".join(c.upper() if u else c for c, u in zip(text, upper, strict=True))
    )


_SPACE: Final = st.sampled_from(["", " ", "  ", "\t", ' "', '"'])
_TYPE: Final = st.sampled_from(
    ["multipart/form-data", "multipart/mixed", "multipart/form-data+json", "multipart", "form-data", "text/plain", "*", ""]
).flatmap(_cased)
_VALUE: Final = st.text(st.characters(codec="ascii", exclude_characters=";"), max_size=12) | st.sampled_from(
    ["XyZ", '"XyZ"', '"a b"', '""', "", '"', "a=b", " XyZ ", '"XyZ', "XyZ\t"]
)
_NAME: Final = st.sampled_from(["boundary", "charset", "boundary*", "bound", "", "name"]).flatmap(_cased)
_PARAMETER: Final = st.builds(lambda a, name, b, eq, value: f"{a}{name}{b}{eq}{value}", _SPACE, _NAME, _SPACE, st.sampled_from(["=", "", "=="]), _VALUE)
CLIENT_LIKE: Final = st.builds(
    lambda lead, media, trail, parameters: f"{lead}{media}{trail}" + "".join(f";{p}" for p in parameters),
    _SPACE, _TYPE, _SPACE, st.lists(_PARAMETER, max_size=4),
)  # fmt: skip


@needs_aiohttp_reading
@given(CLIENT_LIKE)
@example("multipart/form-data; boundary=XyZ")
@example("multipart/form-data; boundary=XyZ\t")
@example("\tMULTIPART/form-data ;\tBoundary = \"XyZ\" ")
def test_content_types_shaped_like_a_client_s_read_as_aiohttp_read_them(content_type: str) -> None:
    assert outcome(boundary_of, content_type) == outcome(aiohttp_boundary_of, content_type)


@needs_aiohttp_reading
@given(st.text(st.characters(codec="utf-8")) | st.text(st.sampled_from('mulipart/fordaBOUNDRY;= "\t+*xX')))
def test_any_text_reads_as_aiohttp_read_it(content_type: str) -> None:
    assert outcome(boundary_of, content_type) == outcome(aiohttp_boundary_of, content_type)
