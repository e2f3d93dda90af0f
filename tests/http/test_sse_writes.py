"""A follower's writes (http/sse.py `writes`): the shared frames go out in pieces of at most the
limit, small frames joined, a large one in views of itself, the bytes unchanged and in order."""

from __future__ import annotations

from gateway.http.sse import writes


def test_small_frames_are_joined_up_to_the_limit_and_never_cut() -> None:
    frames = [b"a" * 30, b"b" * 30, b"c" * 30, b"d" * 10]
    out = [bytes(piece) for piece in writes(frames, limit=64)]
    assert out == [b"a" * 30 + b"b" * 30, b"c" * 30 + b"d" * 10]


def test_a_frame_past_the_limit_leaves_in_views_of_itself_between_the_others() -> None:
    big = bytes(range(256)) * 4
    out = list(writes([b"x", big, b"y"], limit=100))
    assert all(len(piece) <= 100 for piece in out)
    assert b"".join(bytes(piece) for piece in out) == b"x" + big + b"y"
    views = [piece for piece in out if isinstance(piece, memoryview)]
    assert len(views) == 11 and all(view.obj is big for view in views)  # no copy of the big frame


def test_no_frames_make_no_write() -> None:
    assert list(writes([])) == []
