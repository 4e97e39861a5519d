"""The papers and books the metric definitions follow (``Metric.reference`` of
:mod:`receval_spark.registry`): author, title, venue and year, as a reader can open them."""

from __future__ import annotations

ABDOLLAHPOURI_19 = (
    "Abdollahpouri, Burke & Mobasher, Managing popularity bias in recommender systems "
    "with personalized re-ranking, FLAIRS 2019 (average recommendation popularity, here "
    "relative to the catalogue's)"
)
ABDOLLAHPOURI_19_LONG_TAIL = (
    "Abdollahpouri, Burke & Mobasher, Managing popularity bias in recommender systems with "
    "personalized re-ranking, FLAIRS 2019 (APLT and ACLT, §4; the long tail here: outside the "
    "items=head share of the train interactions)"
)
DESHPANDE_04 = "Deshpande & Karypis, Item-based top-N recommendation algorithms, ACM TOIS 2004"
GE_10 = (
    "Ge, Delgado-Battenfeld & Jannach, Beyond accuracy: evaluating recommender systems by"
    " coverage and serendipity, RecSys 2010"
)
HERLOCKER_04 = (
    "Herlocker et al., Evaluating collaborative filtering recommender systems, ACM TOIS 2004"
)
HIDASI_16 = (
    "Hidasi, Karatzoglou, Baltrunas & Tikk, Session-based recommendations with recurrent "
    "neural networks, ICLR 2016; Ludewig & Jannach, Evaluation of session-based "
    "recommendation algorithms, UMUAI 2018"
)
JARVELIN_02 = (
    "Järvelin & Kekäläinen, Cumulated gain-based evaluation of IR techniques, ACM TOIS "
    "2002; the exponential gain of Burges et al., Learning to rank using gradient "
    "descent, ICML 2005"
)
LUDEWIG_18 = "Ludewig & Jannach, Evaluation of session-based recommendation algorithms, UMUAI 2018"
MANNING_08 = (
    "Manning, Raghavan & Schütze, Introduction to Information Retrieval, Cambridge "
    "University Press 2008, §8.3"
)
MANNING_08_MAP = (
    "Manning, Raghavan & Schütze, Introduction to Information Retrieval, Cambridge "
    "University Press 2008, §8.4"
)
SHANI_11 = (
    "Shani & Gunawardana, Evaluating recommendation systems, Recommender Systems Handbook"
    " 2011, §8.3"
)
VARGAS_14 = (
    "Vargas, Baltrunas, Karatzoglou & Castells, Coverage, redundancy and size-awareness "
    "in genre diversity for recommender systems, RecSys 2014"
)
WEBBER_10 = (
    "Webber, Moffat & Zobel, A similarity measure for indefinite rankings, ACM TOIS 2010 "
    "(RBO_ext, eq. 32)"
)
MOFFAT_08 = (
    "Moffat & Zobel, Rank-biased precision for measurement of retrieval effectiveness, ACM "
    "TOIS 2008"
)
VAN_RIJSBERGEN_79 = "van Rijsbergen, Information Retrieval, 2nd ed., Butterworths 1979, ch. 7"
VOORHEES_99 = "Voorhees, The TREC-8 question answering track report, TREC 1999"
ZHOU_10 = (
    "Zhou et al., Solving the apparent diversity-accuracy dilemma of recommender systems, PNAS 2010"
)
ZIEGLER_05 = (
    "Ziegler et al., Improving recommendation lists through topic diversification, WWW 2005"
)
STECK_18 = "Steck, Calibrated recommendations, RecSys 2018"
DIAZ_20 = "Diaz et al., Evaluating stochastic rankings with expected exposure, CIKM 2020"
SAPIEZYNSKI_19 = (
    "Sapiezynski et al., Quantifying the impact of user attention on fair group representation "
    "in ranked lists, WWW 2019 companion"
)
ADAMOPOULOS_14 = "Adamopoulos & Tuzhilin, On unexpectedness in recommender systems, ACM TIST 2014"
HANLEY_82 = (
    "Hanley & McNeil, The meaning and use of the area under a receiver operating "
    "characteristic (ROC) curve, Radiology 1982; per user: Zhou et al., Deep interest network, "
    "KDD 2018 (GAUC)"
)
