/* OpenCSD's include path for coresight-opencsd-c's single header. */
#include "../../opencsd_c_api.h"
