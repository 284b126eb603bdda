"""check: goldens, and porter's output compared with them (porter run, verify, golden, check).

The package is also porter's `check` function: `porter.check(model, golden=...)` (or texts=,
random=, prompts=) calls porter.check.api.check, which documents it. A module attribute and a
subpackage cannot share the name `porter.check`, so the subpackage itself is made callable
(a module's class may be a ModuleType subclass: the data model's way to customise a module).
"""

import sys
import types


class CallablePackage(types.ModuleType):
    def __call__(self, *args, **kwargs):
        from porter.check.api import check

        return check(*args, **kwargs)


sys.modules[__name__].__class__ = CallablePackage
