"""Arrays as the api takes them: their kinds, the dtype rules, half precision, out= and where=."""
