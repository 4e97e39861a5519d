"""A metric module whose import fails without a Spark session, as a module-level
``@pandas_udf("double")`` (a DDL string) does: the job names the module and the fix."""

from pyspark.sql.functions import pandas_udf


@pandas_udf("double")
def discount(ranks):
    return 1.0 / ranks
