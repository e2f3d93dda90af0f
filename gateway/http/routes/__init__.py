"""One module per endpoint group, each with its own RouteTableDef."""
