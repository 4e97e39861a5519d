"""receval_spark: offline evaluation of recommender systems as a Spark batch job."""

__version__ = "0.1.0"
