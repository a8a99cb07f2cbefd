"""What the order form says, in the shop's words, for each outcome (the tests read them
here too)."""

__all__ = [
    "AMENDED",
    "AMENDED_ALREADY",
    "AMENDED_NOTHING",
    "AMEND_CHANGED",
    "AMEND_EXPIRED",
    "AMEND_NOT_CONFIRMED",
    "AMEND_NOT_DONE",
    "AMEND_STALE",
    "AMEND_STILL_RUNNING",
    "CARD_DECLINED",
    "CHANGED",
    "CHANGED_FIXED",
    "EXPIRED",
    "FORM",
    "NOT_CONFIRMED",
    "NOT_PLACED",
    "PAYMENT_NOT_CONFIRMED",
    "SESSION_LOST",
    "STILL_RUNNING",
    "UNAVAILABLE",
]

#: The form's name, the endpoint it is sent to: its tokens are issued and spent for it alone.
FORM = "orders.create"
CHANGED = (
    "This form was already used for order {number}, with other details: nothing "
    "new was placed. You can update order {number} with the details below, or place "
    "them as another order."
)
EXPIRED = "This form expired — please check your details and submit again."
NOT_PLACED = (
    "Your order was not placed and nothing was charged: we could not save it just "
    "now. Please check your details and submit again."
)
SESSION_LOST = (
    "Your session expired, so we could not accept this form yet. Your details are "
    "still here — please check them and submit again."
)
NOT_CONFIRMED = (
    "We could not confirm your order: our order system stopped answering while "
    "placing it. Your details are kept — please submit again in a few moments: "
    "if it was placed you will see it, and it will not be placed twice."
)
STILL_RUNNING = (
    "We are still placing the order you sent first: it takes longer than usual. "
    "Press Place order again in a few seconds to see it: it will not be placed "
    "twice."
)
UNAVAILABLE = (
    "We could not reach our order system just now, so nothing was placed. Your "
    "details are kept — please submit again in a few moments."
)
CARD_DECLINED = (
    "Your card was declined, so nothing was charged and your order was not "
    "placed. Your details are kept: enter the card again or use another one, "
    "and press Place order."
)
PAYMENT_NOT_CONFIRMED = (
    "Your order is saved, but we could not confirm your card payment "
    "yet: the payment service did not answer in time. Press Place order "
    "again in a few moments to finish it. Submitting again never charges "
    "your card twice."
)
CHANGED_FIXED = (
    "This form was already used for order {number}, with other details: nothing "
    "new was placed. Order {number} can no longer be changed: {why}. Check the "
    "details below and press Place another order to place them as a new order."
)
AMEND_CHANGED = (
    "This form was already used to update order {number}, with other details: "
    "nothing more was changed. Check the details below and press Update again "
    "to change the order to them."
)
AMEND_EXPIRED = (
    "This form expired, so order {number} was not changed. Your details are "
    "still here: press Update again."
)
AMEND_NOT_DONE = (
    "Order {number} was not changed: we could not save the update just now. "
    "Your details are still here: press Update again in a moment."
)
AMEND_NOT_CONFIRMED = (
    "We could not confirm whether order {number} was updated: our order "
    "system stopped answering. Open the order in a few moments to see it; "
    "pressing Update again never updates it twice."
)
AMEND_STALE = (
    "Order {number} was changed since you opened this page (in another tab or window, "
    "perhaps), so it was not updated. It now has: {quantity} × {product}, for {name} "
    "<{email}>, to {address}. Your details are still below: press Update again to "
    "change the order to them."
)
AMEND_STILL_RUNNING = (
    "We are still updating order {number}. Press Update again in a few "
    "seconds to see it: it is never updated twice."
)
#: The notices the order's page shows once after an update (templates/orders/_notices.html).
AMENDED = "amended"
AMENDED_ALREADY = "amended_already"
AMENDED_NOTHING = "amended_nothing"
