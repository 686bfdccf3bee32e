"""(declarations pending)"""

DECLARATIONS: list[str] = []
