"""Stop words: dropped from documents and queries (README, design note 6: natural-language questions
rank better without them). Lists are short on purpose: a word that carries meaning in some project
("use", "test", "上") stays searchable."""

from __future__ import annotations

ENGLISH = frozenset(["a", "about", "above", "after", "again", "against", "all", "also", "am", "an", "and", "any", "are", "aren", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "cannot", "could", "couldn", "did", "didn", "do", "does", "doesn", "doing", "don", "down", "during", "each", "else", "ever", "few", "for", "from", "further", "had", "hadn", "has", "hasn", "have", "haven", "having", "he", "her", "here", "hers", "herself", "him", "himself", "his", "how", "i", "if", "in", "into", "is", "isn", "it", "its", "itself", "just", "let", "me", "more", "most", "must", "mustn", "my", "myself", "no", "nor", "not", "now", "of", "off", "on", "once", "only", "or", "other", "ought", "our", "ours", "ourselves", "out", "over", "own", "please", "same", "shall", "she", "should", "shouldn", "so", "some", "such", "than", "that", "the", "their", "theirs", "them", "themselves", "then", "there", "these", "they", "this", "those", "through", "to", "too", "under", "until", "up", "us", "very", "was", "wasn", "we", "were", "weren", "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with", "won", "would", "wouldn", "you", "your", "yours", "yourself", "yourselves", "s", "t", "d", "ll", "m", "re", "ve", "y", "ok", "okay"])

# Single CJK characters that are function words. A bigram is dropped only when both of its
# characters are listed here (我们, 这个, 不要 …), so content words such as 需要 or 对象 stay.
CJK_CHARS = frozenset("的了是在我你他她它们这那吗呢吧啊呀哦嘛和与或就都也还又很要会能把被给让从到及其之以而并但么个一有没不该吧着过得地")

CJK_BIGRAMS = frozenset(["什么", "怎么", "怎样", "如何", "为何", "是否", "可以", "可能", "之前", "以前", "现在", "时候", "一下", "一些", "这些", "那些", "哪些", "哪个", "请问", "关于", "应该", "还是"])


def is_stop_word(word: str) -> bool:
    return word in ENGLISH


def is_stop_cjk(chars: str) -> bool:
    """A CJK unigram or bigram that carries no meaning on its own."""
    if len(chars) == 1:
        return chars in CJK_CHARS
    return chars in CJK_BIGRAMS or all(c in CJK_CHARS for c in chars)
