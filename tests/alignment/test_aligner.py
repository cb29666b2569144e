"""Piece links of word links (`attnkit.alignment.aligner.piece_links`), checked by hand; the
aligner end to end is tested through its command (tests/apps/translate/test_align.py)."""

from attnkit.alignment.aligner import PairPieces, piece_links


def test_piece_links_link_every_piece_of_two_linked_tokens():
    # Source "a bc" as pieces a | b | c, target "x yz" as x | y | z.
    pair = PairPieces(["a", "bc"], ["x", "yz"], [4, 5, 6], [7, 8, 9],
                      src_owner=[[0], [1], [1]], tgt_owner=[[0], [1], [1]])
    links = {(0, 1), (1, 0)}   # (source token, target token): a-yz, bc-x
    assert piece_links(pair, links) == [(0, 1), (0, 2), (1, 0), (2, 0)]
    assert piece_links(pair, set()) == []
