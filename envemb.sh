. /tmp/h-runtime/env.sh; unset DATABASE_URL
