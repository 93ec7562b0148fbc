// gpujoin indexed nested-loop join kernels (under construction).
#include "gpujoin_inlj.h"
