# Jain & Wallace (2019) audits (stub until that stage lands).


def jain_wallace_targets():
    return []
