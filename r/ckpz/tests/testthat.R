library(testthat)
library(ckpz)
test_check("ckpz")
